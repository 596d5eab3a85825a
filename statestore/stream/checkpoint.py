"""What Spark's checkpoint says about a micro-batch, and which checkpoint may write a store.

Spark writes `<checkpoint>/offsets/<batchId>` before it runs the batch: a version line, a
metadata line, then one JSON line per source, for Kafka `{"topic": {"partition": offset}}`
with the offsets the batch reads up to (exclusive). That JSON is parsed here, once, into
KafkaOffsets; its canonical text is what the Kafka source takes as `startingOffsets`, so the
registry keeps it as the store's position and `--recover-from-store` can resume from it with
a new checkpoint. Read through Hadoop's FileSystem API, so it works for every checkpoint
location Spark supports.

The rules: a checkpoint writes a store only when it belongs to the store's history
(checkpoint_problem, topic_problem), and a batch only as the store's next one or as an exact
replay of one it knows (position_problem). mismatch_error explains a refusal and the ways
to recover.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from statestore.core.errors import CheckpointMismatchError, StateStoreError
from statestore.store.book.registry import KafkaOffsets, StoreProgress


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


def owner(spark, checkpoint: str) -> str | None:
    """The query a checkpoint holds a reading position of (query_id), or None for a new
    checkpoint: one without metadata, or whose query never resolved where it reads (a query that
    failed before its first plan, e.g. on offsets naming too few partitions, leaves only its
    metadata). Spark starts such a query afresh from the `startingOffsets` it is given now."""
    found = query_id(spark, checkpoint)
    return found if found is not None and resolved_a_position(spark, checkpoint) else None


def resolved_a_position(spark, checkpoint: str) -> bool:
    """Whether the checkpoint's query resolved its starting offsets (`sources/0/0`) or planned
    a batch (`offsets/N`)."""
    path, fs = _path(spark, checkpoint, "sources", "0", "0")
    if fs.exists(path):
        return True
    path, fs = _path(spark, checkpoint, "offsets")
    return fs.exists(path) and any(status.getPath().getName().isdigit() for status in fs.listStatus(path))


def batch_end_offsets(spark, checkpoint: str, spark_batch_id: int) -> KafkaOffsets:
    """The Kafka source's end offsets of Spark batch `spark_batch_id` (validated)."""
    path, fs = _path(spark, checkpoint, "offsets", str(spark_batch_id))
    lines = _read_lines(spark, path, fs)
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise StateStoreError(f"unexpected offset log format in {path}: {lines[:1]}")
    try:
        return KafkaOffsets.of(json.loads(lines[2]))
    except ValueError:
        raise StateStoreError(f"{path} does not hold Kafka offsets: {lines[2][:200]}") from None


def initial_offsets(spark, checkpoint: str) -> KafkaOffsets | None:
    """Where the checkpoint's first batch starts, or None when the checkpoint
    does not say so plainly. Spark's Kafka source resolves its `startingOffsets` (earliest,
    latest, timestamps or JSON) to offsets once, when the query first starts, and keeps them in
    `<checkpoint>/sources/0/0` (see parse_initial_offsets)."""
    path, fs = _path(spark, checkpoint, "sources", "0", "0")
    if not fs.exists(path):
        return None
    return parse_initial_offsets(_read_lines(spark, path, fs))


def parse_initial_offsets(lines: list[str]) -> KafkaOffsets | None:
    """Pure: the offsets of Spark's initial-offsets file (a NUL byte and a version line, then
    the JSON); None for any other format (another Spark, another source) or an offset that is
    not resolved (negative)."""
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
    return KafkaOffsets.of(offsets)


def starts_batch(start_offsets: KafkaOffsets, end_offsets: KafkaOffsets) -> bool:
    """Pure: whether `start_offsets` can be the start of a batch ending at `end_offsets`: the
    same topics and partitions, none starting after its end. (A first start whose batch was
    never planned, then partitions added before the restart, gives an end with more.)"""
    start, end = start_offsets.as_dict(), end_offsets.as_dict()
    if start.keys() != end.keys():
        return False
    return all(
        start[topic].keys() == partitions.keys()
        and all(start[topic][partition] <= offset for partition, offset in partitions.items())
        for topic, partitions in end.items()
    )


def records_between(start_offsets: KafkaOffsets, end_offsets: KafkaOffsets) -> int | None:
    """Pure: how many Kafka records a batch reads from `start_offsets` up to `end_offsets`,
    or None when that is unknown: a partition of the end without a start (one added to the
    topic since), or an offset that is not a number (`-1`/`-2`, latest/earliest)."""
    start, end = start_offsets.as_dict(), end_offsets.as_dict()
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
    `checkpoint_query`: the query whose reading position the checkpoint holds (owner: None for a
    new checkpoint). `checkpoint_committed`: its commit log holds a batch (committed_batches).

    A store that holds no batches takes a checkpoint that has read nothing, and one that planned
    a batch it never committed only if the store never held any (a first run that crashed before
    its first batch began). A reset store keeps its floor timestamp (`last_ts`): a checkpoint that
    planned batches before the reset would count from where the old store stood, never counting
    the input before that."""
    if not progress.has_batches:
        reset = progress.last_ts is not None
        if checkpoint_query is not None and (checkpoint_committed or reset):
            return (
                "the store holds no batches (it was reset, or dropped and created again) but the checkpoint already "
                "holds a position in the topic (it planned or read batches): resuming it would skip the input before "
                "that position and ignore --starting-offsets"
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


def position_problem(progress: StoreProgress, batch_id: int, end_offsets: KafkaOffsets) -> str | None:
    """Pure: why the store's batch `batch_id`, which Spark planned to end at `end_offsets`,
    cannot be applied to a store at `progress`, or None if it can.

    A batch the store already knows (done, or begun and maybe half written) may run again only
    as a replay: with the end offsets the store recorded for it. Spark plans a batch anew, with
    another end, when its checkpoint lost that batch's offset file (a backup restored from
    between two batches, say) and the input or --max-offsets-per-trigger changed meanwhile;
    the keys the store already tagged with the batch would then be skipped (an undercount) or
    counted from a shorter range. A batch beyond the next one would leave input uncounted."""
    last = progress.last_batch_id
    if last is not None and batch_id < last:
        return f"this checkpoint is at batch {batch_id}, behind the store's batch {last}: it was rolled back"
    pending = progress.pending_batch_id
    unfinished = progress.unfinished_batch
    if unfinished is not None and batch_id > unfinished:
        return (
            f"this checkpoint is at batch {batch_id}, but the store's batch {unfinished} was begun and never finished"
        )
    seen = max(b for b in (last, pending) if b is not None)
    if batch_id > seen + 1:
        return (
            f"this checkpoint is at batch {batch_id}, ahead of the store's batch {seen}: the store does not hold "
            f"batches {seen + 1} to {batch_id - 1} (was it restored from an older backup?)"
        )
    if batch_id == progress.pending_batch_id:
        recorded = progress.pending_offsets
    elif batch_id == last:
        recorded = progress.offsets  # the end of the last batch is where the next one begins
    else:
        return None
    if recorded is not None and KafkaOffsets.parse(recorded) != end_offsets:
        return (
            f"Spark planned batch {batch_id} to end at {end_offsets.as_json()}, but the store's batch {batch_id} "
            f"ends at {recorded}: the checkpoint lost its record of that batch (restored from an older copy?) and "
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


@dataclass(frozen=True)
class QueryCheckpoint:
    """A streaming query's checkpoint: where it is, and the Spark session that reads it."""

    spark: object
    location: str

    def end_offsets(self, spark_batch_id: int) -> KafkaOffsets:
        return batch_end_offsets(self.spark, self.location, spark_batch_id)

    def initial_offsets(self) -> KafkaOffsets | None:
        return initial_offsets(self.spark, self.location)
