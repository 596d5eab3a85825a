"""What Spark's checkpoint says about a micro-batch: the Kafka offsets it ends at.

Spark writes `<checkpoint>/offsets/<batchId>` before it runs the batch: a version line, a
metadata line, then one JSON line per source, for Kafka `{"topic": {"partition": offset}}`
with the offsets the batch reads up to (exclusive). That JSON is exactly what the Kafka
source takes as `startingOffsets`, so the registry keeps it as the store's position and
`--recover-from-store` can resume from it with a new checkpoint. Read through Hadoop's
FileSystem API, so it works for every checkpoint location Spark supports.

It also holds the rule of which checkpoint may write a store (checkpoint_problem) and the
error that explains a refusal and the ways to recover.
"""

from __future__ import annotations

import json

from statestore.core.errors import CheckpointMismatchError, StateStoreError
from statestore.store.book.registry import StoreProgress


def _path(spark, checkpoint: str, *parts: str):
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path("/".join([checkpoint.rstrip("/"), *parts]))
    return path, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def _read_lines(spark, path, fs) -> list[str]:
    jvm = spark.sparkContext._jvm
    stream = fs.open(path)
    try:
        reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(stream, "UTF-8"))
        lines = []
        line = reader.readLine()
        while line is not None:
            lines.append(line)
            line = reader.readLine()
    finally:
        stream.close()
    return lines


def query_id(spark, checkpoint: str) -> str | None:
    """The id of the streaming query a checkpoint belongs to, or None for a new checkpoint."""
    path, fs = _path(spark, checkpoint, "metadata")
    if not fs.exists(path):
        return None
    return json.loads("".join(_read_lines(spark, path, fs)))["id"]


def batch_end_offsets(spark, checkpoint: str, batch_id: int) -> str:
    """The Kafka source's end offsets of `batch_id`, as Spark's JSON (validated)."""
    path, fs = _path(spark, checkpoint, "offsets", str(batch_id))
    lines = _read_lines(spark, path, fs)
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise StateStoreError(f"unexpected offset log format in {path}: {lines[:1]}")
    offsets = json.loads(lines[2])
    if not isinstance(offsets, dict) or not all(isinstance(v, dict) for v in offsets.values()):
        raise StateStoreError(f"{path} does not hold Kafka offsets: {lines[2][:200]}")
    return json.dumps(offsets, sort_keys=True, separators=(",", ":"))


def initial_offsets(spark, checkpoint: str) -> str | None:
    """Where the checkpoint's first batch starts, as Spark's JSON, or None when the checkpoint
    does not say so plainly. Spark's Kafka source resolves its `startingOffsets` (earliest,
    latest, timestamps or JSON) to offsets once, when the query first starts, and keeps them in
    `<checkpoint>/sources/0/0` (see parse_initial_offsets)."""
    path, fs = _path(spark, checkpoint, "sources", "0", "0")
    if not fs.exists(path):
        return None
    return parse_initial_offsets(_read_lines(spark, path, fs))


def parse_initial_offsets(lines: list[str]) -> str | None:
    """Pure: the offsets of Spark's initial-offsets file (a NUL byte and a version line, then
    the JSON), as sorted compact JSON; None for any other format (another Spark, another
    source) or an offset that is not resolved (negative)."""
    if len(lines) < 2 or not lines[0].lstrip("\x00").startswith("v"):
        return None
    try:
        offsets = json.loads(lines[1])
    except ValueError:
        return None
    if not isinstance(offsets, dict) or not all(
        isinstance(partitions, dict)
        and all(
            isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0 for offset in partitions.values()
        )
        for partitions in offsets.values()
    ):
        return None
    return json.dumps(offsets, sort_keys=True, separators=(",", ":"))


def starts_batch(start_offsets: str, end_offsets: str) -> bool:
    """Pure: whether `start_offsets` can be the start of a batch ending at `end_offsets`: the
    same topics and partitions, none starting after its end. (A first start whose batch was
    never planned, then partitions added before the restart, gives an end with more.)"""
    start, end = json.loads(start_offsets), json.loads(end_offsets)
    if start.keys() != end.keys():
        return False
    return all(
        start[topic].keys() == partitions.keys()
        and all(start[topic][partition] <= offset for partition, offset in partitions.items())
        for topic, partitions in end.items()
    )


def records_between(start_offsets: str, end_offsets: str) -> int | None:
    """Pure: how many Kafka records a batch reads from `start_offsets` up to `end_offsets`
    (Spark's JSON), or None when that is unknown: a partition of the end without a start (one
    added to the topic since), or an offset that is not a number (`-1`/`-2`, latest/earliest)."""
    start, end = json.loads(start_offsets), json.loads(end_offsets)
    total = 0
    for topic, partitions in end.items():
        for partition, last in partitions.items():
            first = start.get(topic, {}).get(partition)
            if not isinstance(first, int) or not isinstance(last, int) or first < 0 or last < first:
                return None
            total += last - first
    return total


def committed_batches(spark, checkpoint: str) -> bool:
    """Whether Spark's commit log of the checkpoint holds any batch: the checkpoint has read
    (and its query handed to the store) some of the topic, so it resumes after that input."""
    path, fs = _path(spark, checkpoint, "commits")
    if not fs.exists(path):
        return False
    return any(status.getPath().getName().isdigit() for status in fs.listStatus(path))


def checkpoint_problem(
    progress: StoreProgress, checkpoint_query: str | None, recover: bool, checkpoint_committed: bool = False
) -> str | None:
    """Pure: why a checkpoint cannot write this store, or None if it can.
    `checkpoint_committed`: the checkpoint's commit log holds a batch (committed_batches)."""
    if not progress.has_batches:
        if checkpoint_query is not None and checkpoint_committed:
            return (
                "the store holds no batches (it was reset, or dropped and created again) but the checkpoint has "
                "already read part of the topic: resuming it would skip that input and ignore --starting-offsets"
            )
        return None
    if checkpoint_query == progress.query_id:
        return None
    if checkpoint_query is None:
        if recover:
            return None
        return (
            "the checkpoint is new (deleted, or never used) but the store already holds the results of "
            f"batches up to {progress.last_batch_id}: reading the topic again would count it twice"
        )
    return (
        f"the checkpoint belongs to query {checkpoint_query}, but the store was last written by query "
        f"{progress.query_id}: the checkpoint was replaced"
    )


def topic_problem(progress: StoreProgress, topic: str, topic_id: str | None) -> str | None:
    """Pure: why the store cannot go on reading `topic`, whose id Kafka now gives as `topic_id`
    (None: no such topic), or None if it can. The store's offsets name records of the topic it
    last read; a topic deleted and created again under the same name starts from offset 0, and
    resuming at the old offsets would skip its first records (or, with fewer, Spark fails)."""
    if not progress.has_batches or progress.topic_id is None or topic_id is None:
        return None
    if topic_id != progress.topic_id:
        return (
            f"topic '{topic}' was deleted and created again since the store last read it (its id was "
            f"{progress.topic_id}, now {topic_id}): the offsets the store and the checkpoint hold name records that "
            "no longer exist"
        )
    return None


# The way out of topic_problem.
NEW_TOPIC = (
    "To count the new topic, start the store over (`statestore reset {store} --yes`, then a new, empty --checkpoint) "
    "or count it into another store."
)


def position_problem(progress: StoreProgress, logical: int, end_offsets: str) -> str | None:
    """Pure: why logical batch `logical`, which Spark planned to end at `end_offsets`, cannot be
    applied to a store at `progress`, or None if it can.

    A batch the store already knows (done, or begun and maybe half written) may run again only
    as a replay: with the end offsets the store recorded for it. Spark plans a batch anew, with
    another end, when its checkpoint lost that batch's offset file (a backup restored from
    between two batches, say) and the input or --max-offsets-per-trigger changed meanwhile;
    the keys the store already tagged with the batch would then be skipped (an undercount) or
    counted from a shorter range. A batch beyond the next one would leave input uncounted."""
    last = progress.last_batch_id
    if last is not None and logical < last:
        return f"this checkpoint is at batch {logical}, behind the store's batch {last}: it was rolled back"
    pending = progress.pending_batch_id
    unfinished = progress.unfinished_batch
    if unfinished is not None and logical > unfinished:
        return f"this checkpoint is at batch {logical}, but the store's batch {unfinished} was begun and never finished"
    seen = max(b for b in (last, pending) if b is not None)
    if logical > seen + 1:
        return (
            f"this checkpoint is at batch {logical}, ahead of the store's batch {seen}: the store does not hold "
            f"batches {seen + 1} to {logical - 1} (was it restored from an older backup?)"
        )
    if logical == progress.pending_batch_id:
        recorded = progress.pending_offsets
    elif logical == last:
        recorded = progress.offsets  # the end of the last batch is where the next one begins
    else:
        return None
    if recorded is not None and json.loads(recorded) != json.loads(end_offsets):
        return (
            f"Spark planned batch {logical} to end at {end_offsets}, but the store's batch {logical} ends at "
            f"{recorded}: the checkpoint lost its record of that batch (restored from an older copy?) and "
            "planned it again over other input"
        )
    return None


# The way out of a refusal for a store with no batches under a used checkpoint (checkpoint_problem).
START_OVER = "To count from --starting-offsets, delete the checkpoint or pass a new, empty --checkpoint."


def mismatch_error(store: str, location: str, problem: str, way_out: str | None = None) -> CheckpointMismatchError:
    """The refusal of a checkpoint, with `way_out` (default: the three ways back for a store
    that holds batches)."""
    if way_out is None:
        way_out = (
            f"To recover, either restore the original checkpoint at {location}; or rerun with a new, empty "
            "--checkpoint and --recover-from-store to continue from the store's recorded position (exactly, no "
            f"input skipped or counted twice); or start over with `statestore reset {store} --yes` (deletes its "
            "counts)."
        )
    return CheckpointMismatchError(f"store '{store}': {problem}. Nothing was written. {way_out}")
