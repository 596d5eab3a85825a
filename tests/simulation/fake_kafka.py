"""Kafka, as far as the stream sees it: one topic of partitions of records, each record with an
offset, a value (text, or None for a message without one) and a timestamp (its event time).

What matters of the real system and is kept: offsets per partition start at 0 and only grow,
partitions can be added (never removed), a range of offsets always reads the same records,
and a partition a reader has no start for is read from its first record (Spark's Kafka source
starts partitions it discovers at their earliest offset). Offsets travel as the package's
KafkaOffsets (`{"topic": {"partition": offset}}`), as in Spark's offset log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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


@dataclass
class FakeTopic:
    """A topic: records per partition, in offset order."""

    name: str = "words"
    topic_id: str = "topic-id-1"  # Kafka's id of the topic (never created again here)
    partitions: list[list[Record]] = field(default_factory=lambda: [[]])

    def produce(self, partition: int, value: str | None, time_ms: int) -> Record:
        records = self.partitions[partition]
        record = Record(partition, len(records), value, time_ms)
        records.append(record)
        return record

    def add_partition(self) -> None:
        self.partitions.append([])

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    def latest(self) -> Offsets:
        """The end offset of every partition (the offset the next record will get)."""
        return {partition: len(records) for partition, records in enumerate(self.partitions)}

    def earliest(self) -> Offsets:
        return dict.fromkeys(range(self.partition_count), 0)

    def read(self, start: Mapping[int, int], end: Mapping[int, int]) -> list[Record]:
        """The records from `start` (a partition without one: from its first record) up to `end`."""
        return [
            record
            for partition, last in sorted(end.items())
            for record in self.partitions[partition][start.get(partition, 0) : last]
        ]

    def records(self) -> list[Record]:
        return [record for records in self.partitions for record in records]

    def offsets(self, offsets: Mapping[int, int]) -> KafkaOffsets:
        """`offsets` of this topic as the package's KafkaOffsets."""
        return KafkaOffsets.of({self.name: {str(partition): offset for partition, offset in offsets.items()}})

    def of(self, offsets: KafkaOffsets | None) -> Offsets:
        """This topic's offsets in `offsets` (None: none)."""
        if offsets is None:
            return {}
        return {int(partition): offset for partition, offset in offsets.as_dict().get(self.name, {}).items()}
