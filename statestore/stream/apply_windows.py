"""The replay-safe apply of one micro-batch's (word, window) deltas to a window store.

The same rule as the key-value apply (statestore.stream.apply, `advance`), per window: every
window row remembers the batch that last wrote it; batch B skips a row already written by B or
later and writes old + delta with batch_id = B to any other, as an absolute value. A replay
of B, which has the same records and (statestore.stream.windowed) the same stream time and so
the same open windows, completes exactly the rows the first attempt did not reach. The rule
runs as the key-value plan's arrays (statestore.stream.plan) over keys that name a window:
the window's start, then the key (`window_cache_key`).

Windows after the stream time are not read. Every window row the stream wrote holds an event
time it counted, and the store's stream time (recorded with the previous batch) is the largest
of those, so no row of the stream starts after it: such a window is new, written as its delta
alone. An attempt of B before a crash, deciding from the same stream time, wrote that very value,
so a replay writes it again unchanged. This holds while the stream is the store's only writer
besides the expire job (which only deletes), the apply cache's condition, so it is used only
with the cache on (statestore.stream.batch_apply).

The apply cache (statestore.stream.apply_cache) serves window stores as it serves key-value
ones, with the same trust rules, keyed by `window_cache_key`: a window this executor wrote at
the previous batch is not read again. Start first, so the windows the stream time has closed
(which no batch writes again) are one prefix of a bucket's file, forgotten when a task opens it:
a file holds the windows open when it was last opened and those written since, not every
window the stream ever wrote.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from statestore.core.config import CassandraConfig
from statestore.core.model import StoreSpec, WindowedEntry
from statestore.store.tables import window_table_for
from statestore.stream.apply import ApplyStats, Delta, Timer, sliced, slices_applier, timed, write_all
from statestore.stream.apply_cache import BucketCache, CachePlan, expiring_keys, remember_unless_expiring
from statestore.stream.plan import SlicePlan, plan_slice, stored_record

WindowKey = tuple[bytes, int]  # (key, window start)
_START = struct.Struct(">q")


class WindowRows(Protocol):
    """The I/O of a window apply, behind which the planning runs: the real table
    (PartitionedWindowTable), or the protocol simulator's fake (tests/simulation/windows.py)."""

    def read(self, session, windows: list[WindowKey], concurrency: int) -> dict[WindowKey, WindowedEntry]:
        """The stored entries among (key, window start) pairs; missing ones are absent (a Found,
        telling the pairs whose rows carry a TTL, when the reader can tell)."""

    def write(self, session, entries: list[WindowedEntry], concurrency: int, write_ts: int | None) -> None:
        """Upsert the entries' absolute values at `write_ts`."""


def window_cache_key(key: bytes, start_ms: int) -> bytes:
    """The plan's and the apply cache's key of `key`'s window at `start_ms` (0 or more, so
    bytewise order is start order): the start, then the key."""
    return _START.pack(start_ms) + key


def window_of(cache_key: bytes) -> WindowKey:
    """(key, window start) of a window_cache_key."""
    return cache_key[_START.size :], _START.unpack_from(cache_key)[0]


def _may_hold(start_ms: int, stream_time_ms: int | None) -> bool:
    """Whether the store may hold a row of the stream's in the window starting at `start_ms`:
    not after the stream time (see the module doc; None: any)."""
    return stream_time_ms is None or start_ms <= stream_time_ms


def windows_to_read(deltas: Iterable[tuple[int, Delta]], stream_time_ms: int | None) -> list[WindowKey]:
    """Pure: the (key, window start) pairs a batch must read, all but those starting after
    `stream_time_ms`, which the store cannot hold (see the module doc; None: read them all)."""
    return [(delta.key, start) for start, delta in deltas if _may_hold(start, stream_time_ms)]


def keyed(deltas: Iterable[tuple[int, Delta]]) -> list[Delta]:
    """(window start, delta) pairs as the apply takes them: deltas keyed by window_cache_key."""
    return [delta._replace(key=window_cache_key(delta.key, start)) for start, delta in deltas]


@dataclass(frozen=True)
class TimedRows:
    """How the apply of a timed store names its rows: the row a plan key names (what the table
    reads, `row_of`) and back (`key_of`), the entry the table writes for a row's new value
    (`entry_of`), and the row's time the stream time bounds (`time_of`). A window store's rows
    are (key, window start) (WINDOW_ROWS); a paned one's (key, pane, from)
    (statestore.stream.apply_panes.PANE_ROWS)."""

    row_of: Callable[[bytes], tuple]
    key_of: Callable[..., bytes]
    entry_of: Callable[..., object]
    time_of: Callable[[tuple], int]


def plan_rows(
    naming: TimedRows, stored: Sequence[bytes | None], deltas: Sequence[Delta], batch_id: int
) -> tuple[list, SlicePlan]:
    """Pure: the rows batch `batch_id` writes for deltas keyed by `naming`'s plan keys over
    their rows' stored records (statestore.stream.plan's; None: absent), and the plan itself
    (its records as the apply cache keeps them)."""
    plan = plan_slice(stored, deltas, batch_id)
    writes = [naming.entry_of(*naming.row_of(e.key), e.value, e.batch_id, e.time_ms) for e in plan.writes]
    return writes, plan


def apply_rows(
    naming: TimedRows,
    read: Callable[[list], dict],
    write: Callable[[list], None],
    batch_id: int,
    deltas: list[Delta],
    timer: Timer | None = None,
    stream_time_ms: int | None = None,
    cache: BucketCache | None = None,
) -> ApplyStats:
    """Apply deltas keyed by `naming`'s plan keys: read (`read`: rows -> the stored entries, a
    Found telling those carrying a TTL) the rows the store may hold (_may_hold) that `cache`
    (the keys' bucket file, if any) cannot vouch for, then write (`write`) their new absolute
    values, and keep every row's record as the store now holds it in `cache`, but for a row
    read carrying a TTL (remember_unless_expiring)."""
    keys = [delta.key for delta in deltas]
    if cache is None:
        stored: list[bytes | None] = [None] * len(keys)
        unknown: Iterable[int] = range(len(keys))
    else:
        stored, unknown = timed(timer, "cache", lambda: cache.lookup(keys))
    rows = {i: naming.row_of(keys[i]) for i in unknown}
    to_read = {i: row for i, row in rows.items() if _may_hold(naming.time_of(row), stream_time_ms)}
    expiring: set[bytes] = set()
    if to_read:
        found = timed(timer, "read", lambda: read(list(to_read.values())))
        expiring = {naming.key_of(*row) for row in expiring_keys(found)}
        for i, row in to_read.items():
            entry = found.get(row)
            stored[i] = None if entry is None else stored_record(entry)
    writes, plan = timed(timer, "plan", lambda: plan_rows(naming, stored, deltas, batch_id))
    write_all(batch_id, write, writes, timer)
    if cache is not None:
        timed(timer, "cache", lambda: remember_unless_expiring(cache, plan.records, expiring))
    return ApplyStats(len(keys), len(writes), plan.skipped, plan.max_time_ms, read=len(to_read), words=plan.words)


WINDOW_ROWS = TimedRows(window_of, window_cache_key, WindowedEntry, lambda window: window[1])


def plan_window_slice(stored: Sequence[bytes | None], deltas: Sequence[Delta], batch_id: int) -> tuple[list, SlicePlan]:
    """Pure: the window rows batch `batch_id` writes for deltas keyed by window_cache_key over
    their windows' stored records (None: absent), and the plan itself."""
    return plan_rows(WINDOW_ROWS, stored, deltas, batch_id)


def plan_window_writes(
    current: dict[WindowKey, WindowedEntry], deltas: Iterable[tuple[int, Delta]], batch_id: int
) -> tuple[list[WindowedEntry], int]:
    """Pure: the window rows batch `batch_id` writes over the `current` rows of its windows
    ((window start, delta) pairs), and how many it had already written."""
    deltas = list(deltas)
    stored = [None if (e := current.get((d.key, start))) is None else stored_record(e) for start, d in deltas]
    writes, plan = plan_window_slice(stored, keyed(deltas), batch_id)
    return writes, plan.skipped


def apply_window_deltas(
    session,
    spec: StoreSpec,
    batch_id: int,
    deltas: list[Delta],
    concurrency: int,
    write_ts: int,
    timer: Timer | None = None,
    stream_time_ms: int | None = None,
    cache: BucketCache | None = None,
    table: WindowRows | None = None,
) -> ApplyStats:
    """Apply deltas keyed by window_cache_key (apply_rows). `table`: the rows' I/O (None: the
    store's table, window_table_for, noting TTLs with `cache`)."""
    if not deltas:
        return ApplyStats()
    if table is None:
        table = window_table_for(spec) if cache is None else window_table_for(spec).noting_ttl()
    return apply_rows(
        WINDOW_ROWS,
        lambda windows: table.read(session, windows, concurrency),
        lambda rows: table.write(session, rows, concurrency, write_ts),
        batch_id,
        deltas,
        timer,
        stream_time_ms,
        cache,
    )


def window_deltas_of(rows: Iterable) -> Iterator[list[Delta]]:
    """A task's rows of (word, delta, last_ms, window_start[, bucket]) as slices of deltas keyed
    by window_cache_key (apply.sliced)."""
    pack = _START.pack
    return sliced(
        Delta(pack(int(row[3])) + row[0].encode("utf-8"), int(row[1]), row[2], row[4] if len(row) > 4 else None)
        for row in rows
    )


def window_applier(
    config: CassandraConfig,
    spec: StoreSpec,
    batch_id: int,
    write_ts: int,
    timer: Timer | None = None,
    stream_time_ms: int | None = None,
    cache: CachePlan | None = None,
):
    """A function over one task's rows of (word, delta, last_ms, window_start[, bucket]), run by
    statestore.stream.apply.run_applier: bounded slices, each retried on transient Cassandra
    errors within the retry budget (repeating a slice is safe). `stream_time_ms`: the store's
    stream time at the batch's start, when no window after it needs reading (None: every
    window is read). `cache`: the batch's apply-cache plan (rows then carry their bucket); a
    file opened forgets the windows closed at `stream_time_ms`."""

    apply = partial(apply_window_deltas, stream_time_ms=stream_time_ms)
    forget_closed = forget_closed_windows(spec, stream_time_ms)
    return slices_applier(config, spec, batch_id, write_ts, window_deltas_of, apply, timer, cache, forget_closed)


def forget_closed_windows(spec: StoreSpec, stream_time_ms: int | None) -> Callable[[BucketCache], None]:
    """What a task does to each bucket file it opens: forget the windows closed at
    `stream_time_ms`, which no batch writes again (one prefix of the file: keys start first)."""

    def forget_closed(file: BucketCache) -> None:
        file.forget_below(window_cache_key(b"", spec.windowing.first_open_start(stream_time_ms)))

    return forget_closed
