"""A batch's position (registry.BatchPosition), and the checks before a batch may be applied.

The rules it keeps: batch ids in the store only grow. A batch's id is Spark's batch id plus the
store's `batch_base`; a checkpoint recovered from the store (`--recover-from-store`) continues
with a base above every id the store has seen. A batch the store already knows runs again only
as a replay, with the end offsets and the write timestamp the store recorded for it; each new
batch gets a write timestamp above every earlier one. The topic read is the one the store last
read, not one created again under its name.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import functions as F

from statestore.conn.kafka import TopicIds
from statestore.core.codecs import millis_of
from statestore.store.book.registry import BatchPosition, BatchRules, KafkaOffsets, StoreProgress
from statestore.stream import checkpoint
from statestore.stream.checkpoint import QueryCheckpoint

# Spark's Kafka source, in offsets given as JSON: a partition's earliest offset.
EARLIEST = -2


def now_micros() -> int:
    return time.time_ns() // 1000


def write_ts_for(progress: StoreProgress, batch_id: int, now_us: int | None = None) -> int:
    """A replay reuses its batch's timestamp; a new batch gets one above every earlier batch's.
    `now_us`: the clock (epoch micros; None: now_micros(), the wall clock)."""
    if progress.pending_batch_id == batch_id and progress.pending_ts is not None:
        return progress.pending_ts
    floor = max(t for t in (progress.last_ts, progress.pending_ts, 0) if t is not None)
    return max(now_micros() if now_us is None else now_us, floor + 1)


def batch_rules(progress: StoreProgress, batch_id: int, max_future_ms: int) -> BatchRules:
    """Pure: the rules batch `batch_id` counts by. A replay of the pending batch keeps those it
    began under (recorded by begin_batch), so a run given another --max-future, or a retention
    changed meanwhile, counts it as its first attempt did; a new batch takes this run's
    `max_future_ms` and the store's retention now. (A pending batch begun by a release that
    recorded no rules takes this run's.)"""
    if progress.pending_batch_id == batch_id and progress.pending_rules is not None:
        return progress.pending_rules
    return BatchRules(max_future_ms=max_future_ms, retention_ms=progress.retention_ms)


def stream_time_ms(progress: StoreProgress) -> int | None:
    """The store's stream time (its largest event time so far), in milliseconds."""
    return None if progress.max_event_time is None else millis_of(progress.max_event_time)


def recorded_done(progress: StoreProgress, batch_id: int) -> bool:
    """Pure: whether the store recorded batch `batch_id` as done. Spark runs such a batch again
    when its checkpoint lost `commits/N` (a copy restored from between `offsets/N` and
    `commits/N`); position_problem has checked it is the same batch (the end offsets the store
    recorded). Every write of it is in the store already, so it is neither applied nor recorded
    as begun again: that record would overwrite the one of a later batch begun since (its
    offsets and write timestamp, which a replay of that batch needs), and its apply would judge
    lateness by the stream time after it."""
    return progress.last_batch_id is not None and batch_id <= progress.last_batch_id


def checked_batch_id(
    progress: StoreProgress, spark_batch_id: int, end: KafkaOffsets, query_id: str | None, store: str, location: str
) -> tuple[int, int]:
    """(batch id, batch base) of Spark batch `spark_batch_id` of query `query_id`, which ends
    at `end`, for a store at `progress`; CheckpointMismatchError (naming the store and the
    checkpoint's `location`) when the batch may not be applied (checkpoint.position_problem)."""
    if not progress.has_batches:
        if spark_batch_id > 0:
            raise checkpoint.mismatch_error(
                store,
                location,
                f"the store holds no batches (reset while this query ran?), but this checkpoint is at "
                f"batch {spark_batch_id}",
                checkpoint.START_OVER,
            )
        return spark_batch_id, 0
    seen = max(b for b in (progress.last_batch_id, progress.pending_batch_id) if b is not None)
    if progress.query_id == query_id:
        base = progress.batch_base
    elif spark_batch_id == 0:
        # The first batch of a new checkpoint that start() allowed (--recover-from-store,
        # which already finished the pending batch): continue above every id seen.
        base = seen + 1
    else:
        raise checkpoint.mismatch_error(
            store, location, f"the store was last written by query {progress.query_id}, not by this checkpoint's"
        )
    batch_id = base + spark_batch_id
    problem = checkpoint.position_problem(progress, batch_id, end)
    if problem is not None:
        raise checkpoint.mismatch_error(store, location, problem)
    return batch_id, base


def first_start(query_checkpoint: QueryCheckpoint, batch_df, spark_batch_id: int, end: KafkaOffsets) -> KafkaOffsets:
    """Where the store's very first batch starts: the offsets Spark resolved for the
    checkpoint's first batch when this is it (read from the checkpoint) and they fit its
    end, else found in the batch itself (a Spark job reading it once more)."""
    known = query_checkpoint.initial_offsets() if spark_batch_id == 0 else None
    if known is not None and checkpoint.starts_batch(known, end):
        return known
    return first_batch_start(batch_df, end)


def first_batch_start(batch_df, end: KafkaOffsets) -> KafkaOffsets:
    """Where the store's very first batch starts: per partition its lowest offset, or its end
    offset where the batch read nothing. Spark's offset log has no earlier batch to ask."""
    start = end.as_dict()
    for row in batch_df.groupBy("topic", "partition").agg(F.min("offset").alias("first")).collect():
        start.setdefault(row.topic, {})[str(row.partition)] = row.first
    return KafkaOffsets.of(start)


def pending_position(progress: StoreProgress, max_future_ms: int) -> BatchPosition:
    """The position of the store's pending batch (begun, never recorded as done), as the
    store recorded it: a finish of that batch is a replay of it (`max_future_ms`: this run's
    --max-future, for a batch begun with no recorded rules)."""
    rules = batch_rules(progress, progress.pending_batch_id, max_future_ms)
    return BatchPosition(
        batch_id=progress.pending_batch_id,
        write_ts=progress.pending_ts,
        start=KafkaOffsets.parse_stored(progress.offsets),
        end=KafkaOffsets.parse_stored(progress.pending_offsets),
        query_id=progress.query_id,
        batch_base=progress.batch_base,
        stream_time_ms=stream_time_ms(progress),
        retention_ms=rules.retention_ms,
        max_future_ms=rules.max_future_ms,
    )


def naming_partitions(start: KafkaOffsets | None, partitions: dict[str, range | list[int]]) -> KafkaOffsets:
    """Pure: where to read `partitions` (per topic) from, given as JSON to Spark's Kafka source:
    each partition's offset in `start`, or EARLIEST where `start` does not name it. Spark refuses
    specific offsets that do not name every partition it reads ("you must specify all
    TopicPartitions"), and the store's offsets lack a partition added to the topic after the
    batch that ended there: no batch the store recorded read it, so it is read from its start,
    as Spark reads a partition it discovers."""
    known = {} if start is None else start.as_dict()
    named = {}
    for topic, parts in partitions.items():
        named[topic] = {str(p): known.get(topic, {}).get(str(p), EARLIEST) for p in parts}
    return KafkaOffsets.of(named)


def partitions_of(offsets: KafkaOffsets) -> dict[str, list[int]]:
    """Pure: the partitions `offsets` name, per topic (the Kafka source's `assign`)."""
    return {topic: sorted(int(p) for p, _ in parts) for topic, parts in offsets.by_topic}


@dataclass(frozen=True)
class SourceTopic:
    """The topic a stream reads, and where to ask Kafka for its id."""

    name: str
    ids: TopicIds

    def checked_id(self, progress: StoreProgress, store: str, location: str) -> str | None:
        """The topic's id now (None: no such topic), or CheckpointMismatchError when it is not
        the one the store last read (checkpoint.topic_problem: the topic was created again)."""
        topic_id = self.ids.of(self.name)
        problem = checkpoint.topic_problem(progress, self.name, topic_id)
        if problem is not None:
            raise checkpoint.mismatch_error(store, location, problem, checkpoint.NEW_TOPIC.format(store=store))
        return topic_id
