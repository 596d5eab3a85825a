"""Kafka, as far as the stream sees it: one topic of partitions of records, each record with an
offset, a value (text, or None for a message without one) and a timestamp (its event time).

What matters of the real system and is kept: offsets per partition start at 0 and only grow,
partitions can be added (never removed), a range of offsets always reads the same records,
and a partition a reader has no start for is read from its first record (Spark's Kafka source
starts partitions it discovers at their earliest offset). Offsets travel as the package's
KafkaOffsets (`{"topic": {"partition": offset}}`), as in Spark's offset log.

Transactions: a transactional producer's records take their offsets when produced; its commit or
abort writes a control record (which takes an offset too) on every partition it wrote to. A
reader at the job's isolation level (conn.kafka.spark_source_options: read_committed unless set
otherwise) sees committed records only: the aborted ones and the control records are gaps in
the offsets (Spark's Kafka source reads over them, SPARK-25005), and the end of a partition it
is given (Spark's latest offsets, the `endOffsets` of its consumer) is the last stable offset:
the first offset of the oldest transaction still open there, or the partition's end. At
read_uncommitted it reads every data record, open or aborted, up to the partition's end.

A topic deleted and created again under the same name (`recreate`) gets a new topic id and
empty partitions whose offsets start at 0 again; open transactions die with it (their producers
are fenced). The records of the topic it replaced stay readable by their old id (`as_of`): what
the store counted from them is judged against them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

from statestore.conn import kafka as kafka_conn
from statestore.core.config.kafka import KafkaConfig
from statestore.store.book.registry import KafkaOffsets

# Offsets of one topic: partition -> offset (a start, inclusive, or an end, exclusive).
Offsets = dict[int, int]


@dataclass(frozen=True)
class Record:
    """One Kafka record of the topic."""

    partition: int
    offset: int
    value: str | None  # None: a message without a value (a dead letter `null_value`)
    time_ms: int  # the record's Kafka timestamp: its event time

    @property
    def coordinates(self) -> tuple[int, int]:
        return self.partition, self.offset


def job_isolation_level() -> str:
    """The isolation level of the job's Kafka reads: conn.kafka.spark_source_options' own, of
    the default configuration."""
    return kafka_conn.spark_source_options(KafkaConfig())["kafka.isolation.level"]


@dataclass
class FakeTopic:
    """A topic: records per partition, in offset order (see the module doc)."""

    name: str = "words"
    topic_id: str = "topic-id-1"  # Kafka's id of the topic (a new one when created again)
    partitions: list[list[Record]] = field(default_factory=lambda: [[]])
    isolation_level: str = field(default_factory=job_isolation_level)  # the job's reads
    markers: set[tuple[int, int]] = field(default_factory=set)  # control records (commit, abort)
    aborted: set[tuple[int, int]] = field(default_factory=set)  # records of aborted transactions
    # The open transactions: producer number -> the offsets of its records so far.
    open: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    uncommitted: set[tuple[int, int]] = field(default_factory=set)  # the records of the open ones
    producing_into: int | None = None  # the open transaction records go into when produced (None: none)
    transactions_made: int = 0
    generations: int = 1  # how many times the topic was created
    retired: dict[str, FakeTopic] = field(default_factory=dict)  # topic id -> the topic it was

    def produce(self, partition: int, value: str | None, time_ms: int, transaction: int | None = None) -> Record:
        """A record (`transaction`: in that open transaction; by default the one records go into)."""
        transaction = self.producing_into if transaction is None else transaction
        records = self.partitions[partition]
        record = Record(partition, len(records), value, time_ms)
        records.append(record)
        if transaction is not None:
            self.open[transaction].append(record.coordinates)
            self.uncommitted.add(record.coordinates)
        return record

    def begin_transaction(self) -> int:
        """A transactional producer's new transaction (its number)."""
        self.transactions_made += 1
        self.open[self.transactions_made] = []
        return self.transactions_made

    def end_transaction(self, transaction: int, commit: bool) -> None:
        """The transaction committed or aborted: a control record on each partition it wrote to."""
        coordinates = self.open.pop(transaction)
        self.uncommitted.difference_update(coordinates)
        if self.producing_into == transaction:
            self.producing_into = None
        if not commit:
            self.aborted.update(coordinates)
        for partition in sorted({partition for partition, _ in coordinates}):
            marker = Record(partition, len(self.partitions[partition]), None, 0)
            self.partitions[partition].append(marker)
            self.markers.add(marker.coordinates)

    def recreate(self, partition_count: int) -> None:
        """The topic deleted and created again under its name with `partition_count` partitions:
        a new id, offsets from 0; the old topic kept under its old id (`as_of`)."""
        old = copy.copy(self)
        old.retired = {}
        self.retired[self.topic_id] = copy.deepcopy(old)
        self.generations += 1
        self.topic_id = f"topic-id-{self.generations}"
        self.partitions = [[] for _ in range(partition_count)]
        self.markers, self.aborted, self.uncommitted, self.open, self.producing_into = set(), set(), set(), {}, None

    def as_of(self, topic_id: str | None) -> FakeTopic:
        """The topic of id `topic_id`: this one, or one it replaced (None: this one)."""
        return self if topic_id is None else self.retired.get(topic_id, self)

    def visible(self, record: Record, isolation_level: str | None = None) -> bool:
        """Whether a reader at `isolation_level` (None: the job's) returns `record`: never a
        control record; at read_committed, no record of an aborted or open transaction."""
        if not (self.markers or self.open):  # (no transaction yet: every record)
            return True
        if record.coordinates in self.markers:
            return False
        if (isolation_level or self.isolation_level) == "read_uncommitted":
            return True
        return record.coordinates not in self.aborted and record.coordinates not in self.uncommitted

    def add_partition(self) -> None:
        self.partitions.append([])

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    def latest(self) -> Offsets:
        """The end of every partition a reader is given: at read_committed its last stable offset
        (the first offset of its oldest open transaction, or its end), else its end."""
        ends = {partition: len(records) for partition, records in enumerate(self.partitions)}
        if self.isolation_level == "read_uncommitted":
            return ends
        for records in self.open.values():
            for partition, offset in records:
                ends[partition] = min(ends[partition], offset)
        return ends

    def earliest(self) -> Offsets:
        return dict.fromkeys(range(self.partition_count), 0)

    def read(
        self, start: Mapping[int, int], end: Mapping[int, int], isolation_level: str | None = None
    ) -> list[Record]:
        """The records from `start` (a partition without one: from its first record) up to `end`
        that a reader at `isolation_level` (None: the job's) returns."""
        return [
            record
            for partition, last in sorted(end.items())
            for record in self.partitions[partition][start.get(partition, 0) : last]
            if self.visible(record, isolation_level)
        ]

    def records(self, isolation_level: str | None = None) -> list[Record]:
        """Every record a reader at `isolation_level` (None: the job's) returns now."""
        return [record for records in self.partitions for record in records if self.visible(record, isolation_level)]

    def offsets(self, offsets: Mapping[int, int]) -> KafkaOffsets:
        """`offsets` of this topic as the package's KafkaOffsets."""
        return KafkaOffsets.of({self.name: {str(partition): offset for partition, offset in offsets.items()}})

    def of(self, offsets: KafkaOffsets | None) -> Offsets:
        """This topic's offsets in `offsets` (None: none)."""
        if offsets is None:
            return {}
        return {int(partition): offset for partition, offset in offsets.as_dict().get(self.name, {}).items()}
