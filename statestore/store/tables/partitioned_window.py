"""The partitioned window store's table: PRIMARY KEY ((partition, segment), key, window_start).

The segment is the window's start over the segment span (statestore.store.tables.segmented has
the layout the window and session tables share, and its rules). Within a Cassandra partition rows
sort by key, then window start, so one key's windows over a time span are one slice per segment.
The rule: this module owns every CQL statement of a window table but the shared segment ones.
"""

from __future__ import annotations

from collections.abc import Iterator

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.conn.cassandra import prepare
from statestore.core.model import EVERYTHING, KeyRange, StoreSpec, WindowedEntry
from statestore.core.options import TableOptions
from statestore.store.tables.base import TTL_COLUMN, range_condition, time_ms_of
from statestore.store.tables.base import unset_if_none as _time
from statestore.store.tables.paging import merge_in_order, paged
from statestore.store.tables.segmented import SegmentedTable
from statestore.store.tables.splits import Split

_COLUMNS = "key, window_start, value, batch_id, time"


def _entry(row) -> WindowedEntry:
    return WindowedEntry(row.key, row.window_start, row.value, row.batch_id, time_ms_of(row.time))


def _start(entry: WindowedEntry) -> int:
    return entry.start_ms


def _window_values(e: WindowedEntry) -> tuple:
    return (e.key, e.start_ms, e.value, _time(e), e.batch_id)


def _order(entry: WindowedEntry) -> tuple[bytes, int]:
    return (entry.key, entry.start_ms)


class PartitionedWindowTable(SegmentedTable):
    """A window store's table; it owns every CQL statement that touches it but the shared
    segment ones (SegmentedTable). No I/O here."""

    _SPLIT_COLUMNS = _COLUMNS
    _SPLIT_TIME = "window_start"
    _split_entry = staticmethod(_entry)

    def __init__(self, spec: StoreSpec, profile: object = EXEC_PROFILE_DEFAULT) -> None:
        if spec.windowing is None:
            raise ValueError(f"store {spec.name} is not a window store")
        super().__init__(spec, profile)

    def create_cql(self, options: TableOptions | None = None) -> str:
        options = options or self.default_options()
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            " partition int, segment bigint, key blob, window_start bigint, value blob,"
            " time timestamp, batch_id bigint,"
            " PRIMARY KEY ((partition, segment), key, window_start))"
            f" WITH {options.cql(f'statestore partitioned-window store {self.spec.name}')}"
        )

    def write(self, session, entries: list[WindowedEntry], concurrency: int, write_ts: int | None) -> None:
        """Upsert absolute values in prepared UNLOGGED batches, each within one Cassandra
        partition (idempotent, so retries are safe; at `write_ts` microseconds, None: the
        server's clock)."""
        insert = (
            f"INSERT INTO {self.qualified} (partition, segment, key, window_start, value, time, batch_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)"
        )
        self._write_by_partition(session, insert, entries, _start, _window_values, concurrency, write_ts)

    def read(
        self, session, windows: list[tuple[bytes, int]], concurrency: int
    ) -> dict[tuple[bytes, int], WindowedEntry]:
        """The stored entries among (key, window start) pairs; missing ones are absent. One
        query per Cassandra partition and up to 100 pairs (SegmentedTable._read_rows: a multi-column IN on the
        clustering key), not one per key: the windowed apply reads every window it writes. A
        Found when this table notes TTLs (NotesTtl; `expiring` holds such pairs)."""
        return self._read_rows(session, _COLUMNS, ("key", "window_start"), windows, _entry, concurrency)

    def get(self, session, key: bytes, start_ms: int) -> WindowedEntry | None:
        select = prepare(
            session,
            f"SELECT {_COLUMNS} FROM {self.qualified}"
            " WHERE partition = ? AND segment = ? AND key = ? AND window_start = ?",
        )
        select.is_idempotent = True
        row = session.execute(select, (*self._home(key, start_ms), key, start_ms), execution_profile=self.profile).one()
        return None if row is None else _entry(row)

    def fetch(
        self,
        session,
        key: bytes,
        segments: list[int],
        start_from: int,
        start_to: int,
        reverse: bool = False,
        page_size: int = 5000,
    ) -> Iterator[WindowedEntry]:
        """`key`'s windows starting in [start_from, start_to] among `segments` (ascending), by
        start (descending with `reverse`): one slice per segment, segments in turn."""
        order = " ORDER BY key DESC, window_start DESC" if reverse else ""
        select = prepare(
            session,
            f"SELECT {_COLUMNS} FROM {self.qualified} WHERE partition = ? AND segment = ? AND key = ?"
            f" AND window_start >= ? AND window_start <= ?{order}",
        )
        select.is_idempotent = True
        partition = self.partition_of(key)
        for segment in reversed(segments) if reverse else segments:
            for row in paged(session, select, (partition, segment, key, start_from, start_to), page_size, self.profile):
                yield _entry(row)

    def fetch_range(
        self,
        session,
        segments: list[int],
        key_range: KeyRange = EVERYTHING,
        start_from: int | None = None,
        start_to: int | None = None,
        reverse: bool = False,
        page_size: int = 5000,
    ) -> Iterator[WindowedEntry]:
        """Windows of keys in `key_range` starting in [start_from, start_to] (None: unbounded)
        among `segments`, by key then start (both descending with `reverse`). Every store
        partition of every segment is read concurrently and merged."""
        select = self._range_select(session, key_range, reverse, _COLUMNS)
        rows = self._range_rows(session, select, segments, key_range, start_from, start_to, page_size)
        return merge_in_order([map(_entry, stream) for stream in rows], key=_order, reverse=reverse)

    def fetch_lifetimes(self, session, segments: list[int]) -> Iterator[tuple[WindowedEntry, int | None]]:
        """Every window among `segments`, by key then start, with the seconds its row has left to
        live (its TTL; None: it carries none): what a copy of the store into another table keeps
        (statestore.store.migration), so that no row outlives, or dies before, what it would have."""
        select = self._range_select(session, EVERYTHING, False, f"{_COLUMNS}, {TTL_COLUMN}")
        rows = self._range_rows(session, select, segments, EVERYTHING, None, None, 5000)
        streams = [((_entry(row), row.ttl) for row in stream) for stream in rows]
        return merge_in_order(streams, key=lambda lived: _order(lived[0]))

    def _range_select(self, session, key_range: KeyRange, reverse: bool, columns: str):
        condition, _params = range_condition(key_range)
        order = " ORDER BY key DESC, window_start DESC" if reverse else ""
        select = prepare(
            session,
            f"SELECT {columns} FROM {self.qualified} WHERE partition = ? AND segment = ?{condition}{order}",
        )
        select.is_idempotent = True
        return select

    def _range_rows(
        self,
        session,
        select,
        segments: list[int],
        key_range: KeyRange,
        start_from: int | None,
        start_to: int | None,
        page_size: int,
    ) -> list[Iterator]:
        """The rows of `select` (_range_select) in each store partition of each segment, one
        stream apiece, in the table's order."""
        _condition, params = range_condition(key_range)
        return [
            (
                row
                for row in paged(session, select, (partition, segment, *params), page_size, self.profile)
                # CQL cannot bound window_start after a range on key: bound it here.
                if (start_from is None or row.window_start >= start_from)
                and (start_to is None or row.window_start <= start_to)
            )
            for segment in segments
            for partition in range(self.spec.partitions)
        ]

    def read_split(
        self, session, split: Split, start_from: int = 0, start_to: int = 2**63 - 1, page_size: int = 5000
    ) -> Iterator[WindowedEntry]:
        """The windows of `split` (statestore.store.tables.splits) starting in [start_from,
        start_to]: its keys' (one slice per key and Cassandra partition), or its key range's."""
        return self._read_split(session, split, start_from, start_to, page_size)

    def delete(self, session, key: bytes, start_ms: int) -> None:
        statement = prepare(
            session,
            f"DELETE FROM {self.qualified} WHERE partition = ? AND segment = ? AND key = ? AND window_start = ?",
        )
        statement.is_idempotent = True
        session.execute(statement, (*self._home(key, start_ms), key, start_ms), execution_profile=self.profile)
