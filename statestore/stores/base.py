"""What every store type shares: its description and the contract of its table module."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.errors import UnsupportedOperationError, ValueTooLargeError
from statestore.names import store_table, validate_keyspace, validate_store_name, validate_table_name
from statestore.options import TableOptions

# Cassandra refuses keys over 64 KiB - 1 byte (partition and clustering keys alike).
MAX_KEY_BYTES = 65535


class StoreType(enum.StrEnum):
    PARTITIONED_KV = "partitioned-kv"
    GLOBAL_KV = "global-kv"
    PARTITIONED_VERSIONED = "partitioned-versioned"
    GLOBAL_VERSIONED = "global-versioned"

    @classmethod
    def parse(cls, raw: str) -> StoreType:
        try:
            return cls(raw)
        except ValueError:
            choices = ", ".join(t.value for t in cls)
            raise ValueError(f"unknown store type {raw!r}: use one of {choices}") from None

    @property
    def versioned(self) -> bool:
        return self in (StoreType.PARTITIONED_VERSIONED, StoreType.GLOBAL_VERSIONED)

    @property
    def partitioned(self) -> bool:
        return self in (StoreType.PARTITIONED_KV, StoreType.PARTITIONED_VERSIONED)


@dataclass(frozen=True)
class StoreSpec:
    """A store as registered: name, type, partitions (partitioned types), table and codecs.

    `table` defaults to the store name plus '_store' (statestore.names.store_table); the
    codec names are recorded so every reader decodes what the writer encoded.
    """

    keyspace: str
    name: str
    store_type: StoreType
    partitions: int
    table_name: str | None = None
    key_codec: str = "string"
    value_codec: str = "long"

    def __post_init__(self) -> None:
        validate_keyspace(self.keyspace)
        validate_store_name(self.name)
        object.__setattr__(self, "store_type", StoreType.parse(self.store_type))
        if isinstance(self.partitions, bool) or not isinstance(self.partitions, int) or self.partitions < 1:
            raise ValueError(f"a store has at least 1 partition, got {self.partitions!r}")
        if self.table_name is None:
            object.__setattr__(self, "table_name", store_table(self.name))
        validate_table_name(self.table_name)

    @property
    def table(self) -> str:
        return self.table_name

    @property
    def layout(self) -> tuple:
        """What fixes where data lives: two specs with one layout read the same table alike."""
        return (self.store_type, self.partitions, self.table_name)


@dataclass(frozen=True)
class Entry:
    """A stored entry: raw key and value bytes, the batch that last wrote it, its event time."""

    key: bytes
    value: bytes
    batch_id: int | None = None
    time_ms: int | None = None


# The valid_to of a versioned store's current version: still valid, with no end.
OPEN_END = 2**63 - 1


@dataclass(frozen=True)
class Version:
    """One stored version of a key: raw bytes, valid over [valid_from, valid_to) in epoch ms.

    `value` None is a tombstone (the key was deleted over this interval); `batch_id` is the
    batch that wrote it (None: written through the library API); `time_ms` its event time.
    """

    key: bytes
    value: bytes | None
    valid_from: int
    valid_to: int = OPEN_END
    batch_id: int | None = None
    time_ms: int | None = None

    @property
    def current(self) -> bool:
        return self.valid_to == OPEN_END

    @property
    def tombstone(self) -> bool:
        return self.value is None

    def entry(self) -> Entry:
        return Entry(self.key, self.value, self.batch_id, self.time_ms)


@dataclass(frozen=True)
class KeyRange:
    """Bounds on raw key bytes for a scan; None is unbounded. Keys order as unsigned bytes."""

    lower: bytes | None = None
    upper: bytes | None = None
    lower_inclusive: bool = True
    upper_inclusive: bool = True

    @classmethod
    def prefix(cls, prefix: bytes) -> KeyRange:
        return cls(prefix or None, prefix_end(prefix), True, False)

    def after(self, key: bytes, reverse: bool = False) -> KeyRange:
        """The rest of this range past `key` in scan order (a continuation)."""
        if reverse:
            return KeyRange(self.lower, key, self.lower_inclusive, False)
        return KeyRange(key, self.upper, False, self.upper_inclusive)

    def contains(self, key: bytes) -> bool:
        if self.lower is not None and (key < self.lower or (key == self.lower and not self.lower_inclusive)):
            return False
        if self.upper is not None and (key > self.upper or (key == self.upper and not self.upper_inclusive)):
            return False
        return True


EVERYTHING = KeyRange()


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key above every key starting with `prefix` (None: no such key)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def range_condition(key_range: KeyRange) -> tuple[str, tuple]:
    """The CQL condition on the `key` clustering column for `key_range`, and its parameters."""
    condition, params = "", ()
    if key_range.lower is not None:
        condition += f" AND key {'>=' if key_range.lower_inclusive else '>'} ?"
        params += (key_range.lower,)
    if key_range.upper is not None:
        condition += f" AND key {'<=' if key_range.upper_inclusive else '<'} ?"
        params += (key_range.upper,)
    return condition, params


def check_key(key: bytes) -> bytes:
    if not isinstance(key, bytes | bytearray):
        raise TypeError(f"keys are bytes at the table level, got {type(key).__name__}")
    if len(key) == 0:
        raise ValueTooLargeError("an empty key cannot be stored: Cassandra refuses empty key blobs")
    if len(key) > MAX_KEY_BYTES:
        raise ValueTooLargeError(
            f"key of {len(key)} bytes is over Cassandra's {MAX_KEY_BYTES}-byte key limit: shorten or hash it"
        )
    return bytes(key)


class KeyValueTable(ABC):
    """One key-value store type's table: it owns every CQL statement that touches it.

    Constructing one does no I/O; `create_cql` is used by the explicit schema step. Keys and
    values are raw bytes here; statestore.kv_store adds codecs and the read cache.
    """

    def __init__(self, spec: StoreSpec, profile: object = EXEC_PROFILE_DEFAULT) -> None:
        self.spec = spec
        self.qualified = f"{spec.keyspace}.{spec.table}"
        # The execution profile of every statement here (entries are DML: never the DDL profile).
        self.profile = profile

    @abstractmethod
    def create_cql(self, options: TableOptions | None = None) -> str:
        """CREATE TABLE IF NOT EXISTS for this store."""

    @abstractmethod
    def read_entries(self, session, keys: list[bytes], concurrency: int) -> dict[bytes, Entry]:
        """The stored entries among `keys` (missing keys are absent from the result)."""

    @abstractmethod
    def write_entries(self, session, entries: list[Entry], concurrency: int, write_ts: int | None) -> None:
        """Upsert absolute values at write timestamp `write_ts` (microseconds; None: the
        server's clock); every statement is idempotent, so driver retries are safe, and a late
        write of an older batch loses against a newer batch's."""

    @abstractmethod
    def get(self, session, key: bytes) -> Entry | None:
        """One entry by key, in one query."""

    def get_query(self, session, key: bytes) -> tuple[Any, tuple]:
        """The statement and parameters of `get` (for an asynchronous read of the same query)."""
        raise UnsupportedOperationError(f"{type(self).__name__} has no single-query get")

    @abstractmethod
    def put_if_absent(self, session, entry: Entry) -> Entry | None:
        """Insert `entry` unless its key exists (a lightweight transaction); returns the entry
        that was already there, or None if this one was written."""

    @abstractmethod
    def delete(self, session, key: bytes) -> None:
        """Delete one entry (absent keys are fine)."""

    @abstractmethod
    def scan(self, session, key_range: KeyRange = EVERYTHING, reverse: bool = False, page_size: int = 5000):
        """Entries within `key_range` in key byte order (descending with `reverse`), paging
        through the table. Store types that cannot do this efficiently raise
        UnsupportedOperationError naming what to use instead."""

    @abstractmethod
    def scan_unordered(self, session, after: bytes | None = None, page_size: int = 5000) -> Iterator[Entry]:
        """Every entry in the table's cheapest order (token order), continuing after key `after`."""

    @abstractmethod
    def count(self, session) -> int:
        """The exact number of entries (a full scan inside Cassandra: expensive)."""

    def partition_of(self, key: bytes) -> int:
        return 0

    def scan_sorted(self, session, page_size: int = 5000) -> Iterator[Entry]:
        """Every entry in key byte order (the CLI dump)."""
        return self.scan(session, EVERYTHING, False, page_size)


def unset_if_none(entry: Entry):
    """The entry's time for a bound statement: a missing time is left unset, not written as
    null, which Cassandra would store as a tombstone cell on every write."""
    from cassandra.query import UNSET_VALUE

    return UNSET_VALUE if entry.time_ms is None else entry.time_ms


_EPOCH = datetime(1970, 1, 1)  # the driver returns timestamps as naive UTC datetimes
_MILLISECOND = timedelta(milliseconds=1)


def entry_from_row(row) -> Entry:
    """An Entry from a row of (key, value, batch_id, time).

    Runs once per entry of every scan, so the time is converted with datetime arithmetic in C,
    about 10x faster than statestore.codecs.millis_of and equal to it (floor milliseconds).
    """
    moment = row.time
    return Entry(row.key, row.value, row.batch_id, None if moment is None else (moment - _EPOCH) // _MILLISECOND)


def chunked(items: Iterable, size: int) -> Iterator[list]:
    chunk: list = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
