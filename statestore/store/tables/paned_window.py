"""The paned window store's table: PRIMARY KEY ((partition, segment), key, pane_start, from_start).

A hopping window store (size S, hop H < S) whose windowing has panes (statestore.core.windows,
WindowSpec's panes) keeps one row per key and pane of gcd(S, H) ms instead of one per window: the
row (key, pane p, from f) holds what the key's records of pane p counted in the windows starting
at f or later, and window s is the merge of the rows with s <= p < s + S and f <= s. Panes are
for count stores only: values are 8-byte big-endian longs, merged by their sum (merge_panes).

The segment is the pane's start over the segment span (statestore.store.tables.segmented), so a
window's panes may lie in its own segment and the ones after: every read here takes a window
from the segment it starts in, made of its panes there and after (pane_span), and returns the
windows PartitionedWindowTable would, in its order. Dropping an expired segment stays safe: its
panes count only in windows starting in it or before, all expired too.
The rule: this module owns every CQL statement of a paned window table but the shared segment ones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from itertools import chain, groupby
from operator import attrgetter
from typing import NamedTuple

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.conn.cassandra import prepare
from statestore.core.codecs import LONG
from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import EVERYTHING, KeyRange, PaneEntry, StoreSpec, WindowedEntry
from statestore.core.options import TableOptions
from statestore.core.windows import WindowSpec, compose_windows
from statestore.store.tables.base import range_condition, time_ms_of
from statestore.store.tables.base import unset_if_none as _time
from statestore.store.tables.paging import merge_in_order, paged
from statestore.store.tables.segmented import SegmentedTable
from statestore.store.tables.splits import Split, wanted_keys

_COLUMNS = "key, pane_start, from_start, value, batch_id, time"
_LAST = 2**63 - 1


def _pane(row) -> PaneEntry:
    return PaneEntry(row.key, row.pane_start, row.from_start, row.value, row.batch_id, time_ms_of(row.time))


def _pane_start(pane: PaneEntry) -> int:
    return pane.pane_ms


class _LivingPane(NamedTuple):
    """A pane row and the seconds it is to live (0: no TTL), as write_panes' batches take it."""

    pane: PaneEntry
    ttl_s: int

    @property
    def key(self) -> bytes:
        return self.pane.key

    @property
    def value(self) -> bytes:
        return self.pane.value

    def start(self) -> int:
        return _pane_start(self.pane)

    def values(self) -> tuple:
        return (*_pane_values(self.pane), self.ttl_s)


def _pane_values(e: PaneEntry) -> tuple:
    return (e.key, e.pane_ms, e.from_ms, e.value, _time(e), e.batch_id)


def _pane_order(pane: PaneEntry) -> tuple[bytes, int, int]:
    return (pane.key, pane.pane_ms, pane.from_ms)


def _window_order(entry: WindowedEntry) -> tuple[bytes, int]:
    return (entry.key, entry.start_ms)


def _latest(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def merge_panes(panes: list[PaneEntry]) -> tuple[bytes, int | None, int | None]:
    """A window's (value, batch_id, time) from the pane rows it is made of: the sum of their
    counts (8-byte big-endian longs), the latest batch and the latest event time among them."""
    total = sum(LONG.decode(pane.value) for pane in panes)
    return LONG.encode(total), _latest(p.batch_id for p in panes), _latest(p.time_ms for p in panes)


def windows_of(
    windowing: WindowSpec, key: bytes, panes: Iterable[PaneEntry], start_from: int = 0, start_to: int = _LAST
) -> list[WindowedEntry]:
    """Pure: `key`'s windows starting in [start_from, start_to] from its pane rows `panes`, by
    start (compose_windows with merge_panes). A window no row counts in is absent."""
    rows = ((pane.pane_ms, pane.from_ms, pane) for pane in panes)
    composed = compose_windows(windowing, rows, merge_panes, start_from, start_to)
    return [WindowedEntry(key, start, *merged) for start, merged in composed]


def _spans(items: Iterable[tuple[int, int]]) -> list[int]:
    """Every integer of the inclusive spans `items`, ascending, once."""
    out: list[int] = []
    for low, high in sorted(items):
        low = max(low, out[-1] + 1) if out else low
        out.extend(range(low, high + 1))
    return out


class PanedWindowTable(SegmentedTable):
    """A paned window store's table; it owns every CQL statement that touches it but the shared
    segment ones (SegmentedTable). The stream writes and reads pane rows (write_panes,
    read_panes); every other reader gets windows composed of them. No I/O here."""

    def __init__(self, spec: StoreSpec, profile: object = EXEC_PROFILE_DEFAULT) -> None:
        if spec.windowing is None or not getattr(spec.windowing, "panes", False):
            raise ValueError(f"store {spec.name} is not a window store keeping panes")
        super().__init__(spec, profile)

    def create_cql(self, options: TableOptions | None = None) -> str:
        options = options or self.default_options()
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            " partition int, segment bigint, key blob, pane_start bigint, from_start bigint, value blob,"
            " time timestamp, batch_id bigint,"
            " PRIMARY KEY ((partition, segment), key, pane_start, from_start))"
            f" WITH {options.cql(f'statestore partitioned-window store {self.spec.name}')}"
        )

    # -- pane rows: the stream's apply ------------------------------------------------------------

    def write_panes(
        self,
        session,
        entries: list[PaneEntry],
        concurrency: int,
        write_ts: int | None,
        ttls: list[int | None] | None = None,
    ) -> None:
        """Upsert absolute pane rows in prepared UNLOGGED batches, each within one Cassandra
        partition (idempotent, so retries are safe; at `write_ts` microseconds, None: the
        server's clock). `ttls`, one per entry (a copy's: statestore.store.migration), gives
        each row the seconds it is to live (None: no TTL, whatever the table's default);
        without them each row gets the table's default TTL, as every other write."""
        insert = (
            f"INSERT INTO {self.qualified} (partition, segment, key, pane_start, from_start, value, time, batch_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        if ttls is None:
            self._write_by_partition(session, insert, entries, _pane_start, _pane_values, concurrency, write_ts)
            return
        # CQL's TTL 0 is "no TTL", the table's default TTL notwithstanding.
        living = [_LivingPane(entry, ttl or 0) for entry, ttl in zip(entries, ttls, strict=True)]
        self._write_by_partition(
            session, f"{insert} USING TTL ?", living, _LivingPane.start, _LivingPane.values, concurrency, write_ts
        )

    def read_panes(
        self, session, rows: list[tuple[bytes, int, int]], concurrency: int
    ) -> dict[tuple[bytes, int, int], PaneEntry]:
        """The stored pane rows among (key, pane start, from) triples; missing ones are absent.
        One query per Cassandra partition and up to 100 triples (SegmentedTable._read_rows: a multi-column IN on
        the clustering key). A Found when this table notes TTLs (NotesTtl; `expiring` holds
        such triples)."""
        return self._read_rows(session, _COLUMNS, ("key", "pane_start", "from_start"), rows, _pane, concurrency)

    # -- single windows: refused ----------------------------------------------------------------

    def _refuse(self, action: str) -> UnsupportedOperationError:
        return UnsupportedOperationError(
            f"store '{self.spec.name}' keeps its hopping windows as panes (a row per key and pane of "
            f"{self.windowing.pane_ms} ms, a window the sum of the panes it spans): a single window cannot "
            f"be {action}; its stream writes pane rows (write_panes)"
        )

    def write(self, session, entries: list[WindowedEntry], concurrency: int, write_ts: int | None) -> None:
        raise self._refuse("written")

    def delete(self, session, key: bytes, start_ms: int) -> None:
        raise self._refuse("deleted")

    # -- segments: a window's panes lie in its segment and the ones after ------------------------

    def segment_span(self, start_from: int, start_to: int) -> tuple[int, int]:
        """The first and last segment holding panes of the windows starting in [start_from,
        start_to]: the stored segments (segments()) a reader of those windows gives fetch,
        fetch_range or splits are those in this span."""
        low, high = self.windowing.pane_span(start_from, start_to)
        return self.windowing.segment_of(low), self.windowing.segment_of(min(high, _LAST))

    def _window_segments(self, segments: Iterable[int], start_from: int = 0, start_to: int = _LAST) -> list[int]:
        """The segments whose windows `segments` hold panes of: each, and those before it whose
        windows reach into it, those starting within [start_from, start_to] only."""
        w = self.windowing
        first, last = w.segment_of(max(0, start_from)), w.segment_of(start_to)
        reaches = []
        for segment in segments:
            low = max(first, w.segment_of(max(0, segment * w.segment_ms - w.size_ms + w.pane_ms)))
            high = min(last, segment)
            if low <= high:
                reaches.append((low, high))
        return _spans(reaches)

    def _pane_segments(self, windows: list[int], start_from: int, start_to: int) -> list[int]:
        """The segments holding the panes of the windows starting in [start_from, start_to]
        within the segments `windows`."""
        w = self.windowing
        spans = []
        for segment in windows:
            low = max(start_from, segment * w.segment_ms)
            high = min(start_to, (segment + 1) * w.segment_ms - 1)
            if low <= high:
                spans.append((segment, self.segment_span(low, high)[1]))
        return _spans(spans)

    def splits(self, count: int, segments: list[int], key_range: KeyRange = EVERYTHING, keys=None) -> list[Split]:
        """The (partition, segment) Cassandra partitions of the segments whose windows
        `segments` hold panes of (those segments and the ones before them a window reaches over)
        in at most `count` splits; each split reads the windows starting in its segments."""
        return super().splits(count, self._window_segments(segments), key_range, keys)

    # -- windows ---------------------------------------------------------------------------------

    def _kept(self, key: bytes, panes: Iterable[PaneEntry], windows: set[int], start_from: int, start_to: int):
        """`key`'s windows from `panes` starting in [start_from, start_to] and in `windows`."""
        segment_of = self.windowing.segment_of
        return [
            e for e in windows_of(self.windowing, key, panes, start_from, start_to) if segment_of(e.start_ms) in windows
        ]

    def _key_windows(
        self, session, key: bytes, partition: int, windows: list[int], start_from: int, start_to: int, page_size: int
    ) -> list[WindowedEntry]:
        """`key`'s windows starting in [start_from, start_to] within the segments `windows`, by
        start: one slice of its panes per segment holding them."""
        if not windows:
            return []
        select = prepare(
            session,
            f"SELECT {_COLUMNS} FROM {self.qualified} WHERE partition = ? AND segment = ? AND key = ?"
            " AND pane_start >= ? AND pane_start <= ?",
        )
        select.is_idempotent = True
        low, high = self.windowing.pane_span(start_from, start_to)
        high = min(high, _LAST)
        panes = (
            _pane(row)
            for segment in self._pane_segments(windows, start_from, start_to)
            for row in paged(session, select, (partition, segment, key, low, high), page_size, self.profile)
        )
        return self._kept(key, panes, set(windows), start_from, start_to)

    def _partition_windows(
        self,
        session,
        partition: int,
        windows: list[int],
        key_range: KeyRange,
        start_from: int,
        start_to: int,
        reverse: bool,
        page_size: int,
    ) -> Iterator[WindowedEntry]:
        """The windows of store partition `partition`'s keys in `key_range` starting in
        [start_from, start_to] within the segments `windows`, by key then start (both descending
        with `reverse`): the pane segments' first pages asked for at once (not on first use),
        merged by key, each key's windows composed of its panes."""
        condition, params = range_condition(key_range)
        order = " ORDER BY key DESC, pane_start DESC, from_start DESC" if reverse else ""
        select = prepare(
            session,
            f"SELECT {_COLUMNS} FROM {self.qualified} WHERE partition = ? AND segment = ?{condition}{order}",
        )
        select.is_idempotent = True
        low, high = self.windowing.pane_span(start_from, start_to)
        streams = [
            (
                _pane(row)
                for row in paged(session, select, (partition, segment, *params), page_size, self.profile)
                # CQL cannot bound pane_start after a range on key: bound it here.
                if low <= row.pane_start <= high
            )
            for segment in self._pane_segments(windows, start_from, start_to)
        ]
        return self._composed(
            merge_in_order(streams, key=_pane_order, reverse=reverse), windows, start_from, start_to, reverse
        )

    def _composed(
        self, panes: Iterator[PaneEntry], windows: list[int], start_from: int, start_to: int, reverse: bool
    ) -> Iterator[WindowedEntry]:
        """The windows of pane rows sorted by key (descending with `reverse`), each key's by start."""
        kept = set(windows)
        for key, mine in groupby(panes, key=attrgetter("key")):
            composed = self._kept(key, mine, kept, start_from, start_to)
            yield from reversed(composed) if reverse else composed

    def get(self, session, key: bytes, start_ms: int) -> WindowedEntry | None:
        """`key`'s window starting at `start_ms`, composed of its panes (None: no row counts in it)."""
        segment = self.windowing.segment_of(start_ms)
        found = self._key_windows(session, key, self.partition_of(key), [segment], start_ms, start_ms, 5000)
        return found[0] if found else None

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
        """`key`'s windows starting in [start_from, start_to] whose panes lie in `segments`
        (ascending: a span of segments, or the stored ones of segment_span), by start
        (descending with `reverse`)."""
        windows = self._window_segments(segments, start_from, start_to)
        found = self._key_windows(session, key, self.partition_of(key), windows, start_from, start_to, page_size)
        return iter(reversed(found) if reverse else found)

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
        whose panes lie in `segments`, by key then start (both descending with `reverse`). Every
        store partition is read concurrently and merged."""
        low = 0 if start_from is None else max(0, start_from)
        high = _LAST if start_to is None else start_to
        windows = self._window_segments(segments, low, high)
        streams = [
            self._partition_windows(session, partition, windows, key_range, low, high, reverse, page_size)
            for partition in range(self.spec.partitions)
        ]
        return merge_in_order(streams, key=_window_order, reverse=reverse)

    def read_split(
        self, session, split: Split, start_from: int = 0, start_to: int = _LAST, page_size: int = 5000
    ) -> Iterator[WindowedEntry]:
        """The windows starting in `split`'s segments (statestore.store.tables.splits) and in
        [start_from, start_to], composed of their panes there and in the segments after: its
        keys' (one slice per key and pane segment), or its key range's. A window belongs to the
        one split holding the segment it starts in."""
        start_from = max(0, start_from)
        first, last = self.windowing.segment_of(start_from), self.windowing.segment_of(start_to)
        by_partition: dict[int, list[int]] = defaultdict(list)
        for partition, segment in split.partitions:
            if first <= segment <= last:
                by_partition[partition].append(segment)
        keys = wanted_keys(split)
        if keys is not None:
            return (
                window
                for partition, windows in by_partition.items()
                for key in keys
                if self.partition_of(key) == partition
                for window in self._key_windows(
                    session, key, partition, sorted(windows), start_from, start_to, page_size
                )
            )
        return chain.from_iterable(
            self._partition_windows(
                session, partition, sorted(windows), split.key_range, start_from, start_to, False, page_size
            )
            for partition, windows in by_partition.items()
        )
