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
from statestore.store.registry import StoreProgress


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


def checkpoint_problem(progress: StoreProgress, checkpoint_query: str | None, recover: bool) -> str | None:
    """Pure: why a checkpoint cannot write this store, or None if it can."""
    if not progress.has_batches or checkpoint_query == progress.query_id:
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


def mismatch_error(store: str, location: str, problem: str) -> CheckpointMismatchError:
    return CheckpointMismatchError(
        f"store '{store}': {problem}. Nothing was written. To recover, either restore the original "
        f"checkpoint at {location}; or rerun with a new, empty --checkpoint and --recover-from-store "
        "to continue from the store's recorded position (exactly, no input skipped or counted twice); "
        f"or start over with `statestore reset {store} --yes` (deletes its counts)."
    )
