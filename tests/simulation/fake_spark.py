"""Spark Structured Streaming, as far as the stream's batches see it: the checkpoint folder and
the micro-batch planning of a query reading the topic with the Kafka source.

What matters of the real system and is kept:
- the folder holds `metadata` (the query's id, written when a query first starts on it),
  `sources/0/0` (the Kafka source's starting offsets, resolved once, at the first plan),
  `offsets/N` (the end offsets of batch N, written before batch N runs) and `commits/N`
  (written after the foreachBatch function returned for batch N). Any copy of it can be
  restored, and a new, empty one used instead;
- a query plans batch N+1 from the end of `offsets/N` (batch 0 from `sources/0/0`), up to the
  topic's latest offsets cut by `maxOffsetsPerTrigger` (KafkaMicroBatchStream.rateLimit), and
  plans nothing when no partition has new records; a partition the start does not name is
  read from its earliest offset;
- on start, the last batch whose `offsets/N` exists without `commits/N` runs again with the
  SAME end offsets (MicroBatchExecution.populateStartOffsets), whatever the settings now;
- offsets given as JSON (`startingOffsets`, and a batch read's start and end) must name every
  partition of the topic, or every partition `assign`ed: Spark's Kafka source asserts it ("If
  startingOffsets contains specific offsets, you must specify all TopicPartitions"), failing
  the query; -2 there is a partition's earliest offset.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

from statestore.store.book.registry import KafkaOffsets
from statestore.stream.position import EARLIEST
from tests.simulation.fake_kafka import FakeTopic, Offsets, Record


class SparkAssertionError(Exception):
    """Spark's Kafka source refused offsets that do not name every partition of the topic (an
    AssertionError in the JVM): the query fails and the job exits 1. No refusal of ours."""


@dataclass
class CheckpointFolder:
    """A query's checkpoint folder (see the module doc)."""

    location: str
    query_id: str | None = None  # metadata
    initial: Offsets | None = None  # sources/0/0
    offsets: dict[int, Offsets] = field(default_factory=dict)  # offsets/N
    commits: set[int] = field(default_factory=set)  # commits/N

    def copy(self) -> CheckpointFolder:
        return copy.deepcopy(self)

    def latest_batch(self) -> int | None:
        return max(self.offsets) if self.offsets else None

    def owner(self) -> str | None:
        """checkpoint.owner: the query id, once the query resolved its start or planned a batch."""
        return self.query_id if self.initial is not None or self.offsets else None

    def committed_batches(self) -> bool:
        """checkpoint.committed_batches: the commit log holds a batch."""
        return bool(self.commits)

    def end_offsets(self, topic: FakeTopic, spark_batch_id: int) -> KafkaOffsets:
        """checkpoint.batch_end_offsets: the end offsets of `offsets/N`."""
        return topic.offsets(self.offsets[spark_batch_id])

    def initial_offsets(self, topic: FakeTopic) -> KafkaOffsets | None:
        """checkpoint.initial_offsets: `sources/0/0`, when written."""
        return None if self.initial is None else topic.offsets(self.initial)

    def describe(self) -> str:
        batches = ", ".join(f"{n}{'' if n in self.commits else ' (uncommitted)'}" for n in sorted(self.offsets))
        return f"checkpoint {self.location} of query {self.query_id}: offsets/[{batches}]"


def specific_offsets(topic: FakeTopic, offsets: Offsets, assigned: set[int] | None = None) -> Offsets:
    """`offsets` given to Spark's Kafka source as JSON, once it checked they name every partition
    it reads (KafkaOffsetReader's fetchSpecificOffsets: the topic's, or the `assigned` ones);
    SparkAssertionError if not. EARLIEST (-2) stands for a partition's earliest offset."""
    partitions = set(range(topic.partition_count)) if assigned is None else assigned
    if set(offsets) != partitions:
        raise SparkAssertionError(
            "If startingOffsets contains specific offsets, you must specify all TopicPartitions. "
            f"Specified: {sorted(offsets)} Assigned: {sorted(partitions)}"
        )
    earliest = topic.earliest()
    return {partition: earliest[partition] if offset == EARLIEST else offset for partition, offset in offsets.items()}


def rate_limit(limit: int, start: Offsets, latest: Offsets) -> Offsets:
    """KafkaMicroBatchStream.rateLimit: the end offsets of a batch of at most about `limit`
    records, shared among the partitions by how far each is behind (a partition that is behind
    gets at least one record)."""
    sizes = {p: end - start.get(p, 0) for p, end in latest.items() if end - start.get(p, 0) > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    ends = {}
    for partition, end in latest.items():
        if partition not in sizes:
            ends[partition] = end
            continue
        prorate = limit * (sizes[partition] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        ends[partition] = min(end, start.get(partition, 0) + share)
    return ends


@dataclass(frozen=True)
class MicroBatch:
    """A batch Spark hands to foreachBatch: its id, the offsets it reads and its records."""

    spark_batch_id: int
    start: Offsets
    end: Offsets
    records: tuple[Record, ...]
    rerun: bool  # planned by an earlier run (offsets/N without commits/N), run again as it was


class SparkQuery:
    """A query running on a checkpoint folder: it plans and hands out batches (see the module doc).
    `starting`: the `startingOffsets` it was started with (None: earliest)."""

    def __init__(
        self,
        folder: CheckpointFolder,
        topic: FakeTopic,
        starting: Offsets | None,
        max_offsets_per_trigger: int | None,
        new_query_id: str,
    ) -> None:
        self.folder = folder
        self.topic = topic
        self.starting = starting
        self.max_offsets_per_trigger = max_offsets_per_trigger
        if folder.query_id is None:  # the metadata file, written when the query is created
            folder.query_id = new_query_id
        self.query_id = folder.query_id

    def next_batch(self) -> MicroBatch | None:
        """The batch to run now, its offsets/N written (None: no new records, no batch)."""
        folder = self.folder
        latest = folder.latest_batch()
        if latest is not None and latest not in folder.commits:
            return self._batch(latest, rerun=True)
        start = self._initial() if latest is None else folder.offsets[latest]
        until = self.topic.latest()
        if self.max_offsets_per_trigger:
            until = rate_limit(self.max_offsets_per_trigger, start, until)
        if all(end <= start.get(partition, 0) for partition, end in until.items()):
            return None
        batch_id = 0 if latest is None else latest + 1
        folder.offsets[batch_id] = until
        return self._batch(batch_id, rerun=False)

    def commit(self, spark_batch_id: int) -> None:
        self.folder.commits.add(spark_batch_id)

    def _initial(self) -> Offsets:
        """sources/0/0: the starting offsets, resolved once, at the first plan."""
        if self.folder.initial is None:
            starting = self.topic.earliest() if self.starting is None else specific_offsets(self.topic, self.starting)
            self.folder.initial = starting
        return self.folder.initial

    def _batch(self, spark_batch_id: int, rerun: bool) -> MicroBatch:
        folder = self.folder
        start = folder.offsets[spark_batch_id - 1] if spark_batch_id > 0 else self._initial()
        end = folder.offsets[spark_batch_id]
        return MicroBatch(spark_batch_id, dict(start), dict(end), tuple(self.topic.read(start, end)), rerun)


def batch_read(topic: FakeTopic, assigned: set[int], start: Offsets, end: Offsets) -> list[Record]:
    """A batch (not streaming) read of the `assigned` partitions of the topic from `start` to
    `end`, both given as JSON, as batches.finish_pending_batch does (`assign`,
    `startingOffsets`, `endingOffsets`)."""
    return topic.read(specific_offsets(topic, start, assigned), specific_offsets(topic, end, assigned))
