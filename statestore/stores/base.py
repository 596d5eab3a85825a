"""What every store type shares: its description and the contract of its table module."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from statestore.codecs import millis_of
from statestore.names import store_table, validate_keyspace, validate_store_name

# Cassandra refuses keys over 64 KiB - 1 byte (partition and clustering keys alike).
MAX_KEY_BYTES = 65535
DEFAULT_COMPACTION = "LeveledCompactionStrategy"


class StoreType(enum.StrEnum):
    PARTITIONED_KV = "partitioned-kv"
    GLOBAL_KV = "global-kv"

    @classmethod
    def parse(cls, raw: str) -> StoreType:
        try:
            return cls(raw)
        except ValueError:
            choices = ", ".join(t.value for t in cls)
            raise ValueError(f"unknown store type {raw!r}: use one of {choices}") from None


@dataclass(frozen=True)
class StoreSpec:
    """A store as registered: its name, type, table and (for partitioned stores) partitions."""

    keyspace: str
    name: str
    store_type: StoreType
    partitions: int

    def __post_init__(self) -> None:
        validate_keyspace(self.keyspace)
        validate_store_name(self.name)
        if self.partitions < 1:
            raise ValueError(f"a store has at least 1 partition, got {self.partitions}")

    @property
    def table(self) -> str:
        return store_table(self.name)


@dataclass(frozen=True)
class Entry:
    """A stored entry: raw key and value bytes, the batch that last wrote it, its event time."""

    key: bytes
    value: bytes
    batch_id: int | None = None
    time_ms: int | None = None


class KeyValueTable(ABC):
    """One store type's table: it owns every CQL statement that touches it.

    Constructing one does no I/O; `create` is the explicit schema step.
    """

    def __init__(self, spec: StoreSpec) -> None:
        self.spec = spec
        self.qualified = f"{spec.keyspace}.{spec.table}"

    @abstractmethod
    def create_cql(self) -> str:
        """CREATE TABLE IF NOT EXISTS for this store."""

    @abstractmethod
    def read_entries(self, session, keys: list[bytes], concurrency: int) -> dict[bytes, Entry]:
        """The stored entries among `keys` (missing keys are absent from the result)."""

    @abstractmethod
    def write_entries(self, session, entries: list[Entry], concurrency: int, write_ts: int) -> None:
        """Upsert absolute values at write timestamp `write_ts` (microseconds); every statement
        is idempotent, so driver retries are safe, and a late write of an older batch loses
        against a newer batch's."""

    @abstractmethod
    def get(self, session, key: bytes) -> Entry | None:
        """One entry by key, in one query."""

    @abstractmethod
    def scan_sorted(self, session, page_size: int = 5000) -> Iterator[Entry]:
        """Every entry in key byte order, paging through the table."""

    def partition_of(self, key: bytes) -> int:
        return 0


def unset_if_none(entry: Entry):
    """The entry's time for a bound statement: a missing time is left unset, not written as
    null, which Cassandra would store as a tombstone cell on every write."""
    from cassandra.query import UNSET_VALUE

    return UNSET_VALUE if entry.time_ms is None else entry.time_ms


def entry_from_row(row) -> Entry:
    """An Entry from a row of (key, value, batch_id, time)."""
    time_ms = None if row.time is None else millis_of(row.time)
    return Entry(row.key, row.value, row.batch_id, time_ms)


def chunked(items: Iterable, size: int) -> Iterator[list]:
    chunk: list = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
