"""What every store type's table module shares: the contract of a table (statestore.core.model
describes the stores themselves) and the row conversions and CQL pieces the modules reuse."""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any

from cassandra.cluster import EXEC_PROFILE_DEFAULT
from cassandra.concurrent import execute_concurrent
from cassandra.query import UNSET_VALUE

from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import EVERYTHING, Entry, KeyRange, StoreSpec
from statestore.core.options import TableOptions


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


# What a read selects beside each row to tell whether it carries a TTL (null: it does not):
# Cassandra drops such a row when its TTL runs out, with no write that a reader could see.
# `value` is written with every row of the stream (its time may be left unset).
TTL_COLUMN = "TTL(value) AS ttl"


class Found(dict):
    """What a read noting TTLs found (a table's `noting_ttl()`), by its key, and `expiring`:
    the keys of the rows among them that carry a TTL."""

    def __init__(self) -> None:
        super().__init__()
        self.expiring: set = set()


class NotesTtl:
    """A table whose reads for the stream's apply (a key-value table's read_entries, a window
    table's read, a session table's find_many) can also tell the rows that carry a TTL: those of
    the copy `noting_ttl()` returns then return a Found, at one more column per row read."""

    notes_ttl = False

    def noting_ttl(self):
        """This table, its apply reads noting TTLs (no I/O: a copy with the flag set)."""
        table = copy.copy(self)
        table.notes_ttl = True
        return table

    def _read_columns(self, columns: str) -> str:
        """`columns`, and TTL_COLUMN when this table notes TTLs."""
        return f"{columns}, {TTL_COLUMN}" if self.notes_ttl else columns

    def _new_found(self) -> dict:
        """An empty result of an apply read: a Found when this table notes TTLs."""
        return Found() if self.notes_ttl else {}


class KeyValueTable(NotesTtl, ABC):
    """One key-value store type's table: it owns every CQL statement that touches it.

    Constructing one does no I/O; `create_cql` is used by the explicit schema step. Keys and
    values are raw bytes here; statestore.store.key_value adds codecs and the read cache.
    """

    def __init__(self, spec: StoreSpec, profile: object = EXEC_PROFILE_DEFAULT) -> None:
        self.spec = spec
        self.qualified = f"{spec.keyspace}.{spec.table}"
        # The execution profile of every statement here (entries are DML: never the DDL profile).
        self.profile = profile

    def default_options(self) -> TableOptions:
        """The options this store's table is created with when none are given."""
        return TableOptions()

    @abstractmethod
    def create_cql(self, options: TableOptions | None = None) -> str:
        """CREATE TABLE IF NOT EXISTS for this store (`default_options` when `options` is None)."""

    def read_entries(self, session, keys: list[bytes], concurrency: int) -> dict[bytes, Entry]:
        """The stored entries among `keys` (missing keys are absent from the result): the queries
        of `get_many_queries`, a chunk of keys each (the client's cost is per request), run
        concurrently; a Found when this table notes TTLs (NotesTtl)."""
        found: dict[bytes, Entry] = self._new_found()
        notes_ttl = self.notes_ttl
        for result in execute_concurrent(
            session,
            execution_profile=self.profile,
            statements_and_parameters=self.get_many_queries(session, keys),
            concurrency=concurrency,
            results_generator=True,
        ):
            for row in result.result_or_exc:
                found[row.key] = entry_from_row(row)
                if notes_ttl and row.ttl is not None:
                    found.expiring.add(row.key)
        return found

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

    def get_many_queries(self, session, keys: list[bytes]) -> list[tuple[Any, tuple]]:
        """The statements and parameters that read the entries of `keys` (a few keys per
        query, each query's rows within one page), for one asynchronous read of many keys."""
        raise UnsupportedOperationError(f"{type(self).__name__} has no multi-key get")

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

    return UNSET_VALUE if entry.time_ms is None else entry.time_ms


EPOCH = datetime(1970, 1, 1)  # the driver returns timestamps as naive UTC datetimes
MILLISECOND = timedelta(milliseconds=1)


def entry_from_row(row) -> Entry:
    """An Entry from a row of (key, value, batch_id, time).

    Runs once per entry of every scan, so the time is converted with datetime arithmetic done in
    C rather than statestore.core.codecs.millis_of; both give the same floor milliseconds.
    """
    return Entry(row.key, row.value, row.batch_id, time_ms_of(row.time))


def time_ms_of(moment: datetime | None) -> int | None:
    """Epoch milliseconds of a `time` cell as the driver returns it (None stays None)."""
    return None if moment is None else (moment - EPOCH) // MILLISECOND


# A write batch's bound: under Cassandra's batch_size_warn_threshold (5 KiB by default).
BATCH_BYTES = 4096


def row_bytes(entry: Entry) -> int:
    """What a row counts against BATCH_BYTES: its key, its value and about 24 bytes besides."""
    return len(entry.key) + len(entry.value) + 24


def write_batches(entries: Iterable[Entry], max_rows: int) -> Iterator[list[Entry]]:
    """`entries` cut into the groups one UNLOGGED batch writes, in order: each as many rows as
    fit (at most `max_rows`, and none added once the rows reach BATCH_BYTES: a single larger
    entry still goes alone), cut down to a power of two, the rest carried into the next. A
    table prepares one batch statement per size (statestore.store.tables.unlogged), so full
    batches are one request each and only a group's last rows need several."""
    rows = list(entries)
    start = 0
    while start < len(rows):
        fit, size = 0, 0
        while start + fit < len(rows) and fit < max_rows and size < BATCH_BYTES:
            entry = rows[start + fit]
            size += row_bytes(entry)
            fit += 1
        take = 1 << (fit.bit_length() - 1)
        yield rows[start : start + take]
        start += take


def chunked(items: Iterable, size: int) -> Iterator[list]:
    chunk: list = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
