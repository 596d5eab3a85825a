"""The replay-safe apply of one micro-batch's (word, window) deltas to a window store.

The same rule as the key-value apply (statestore.stream.apply, `advance`), per window: every
window row remembers the batch that last wrote it; batch B skips a row already written by B or
later and writes old + delta with batch_id = B to any other, as an absolute value. A replay
of B, which has the same records and (statestore.stream.windowed) the same stream time and so
the same open windows, completes exactly the rows the first attempt did not reach.

Windows after the stream time are not read. Every window row the stream wrote holds an event
time it counted, and the store's stream time (recorded with the previous batch) is the largest
of those, so no row of the stream starts after it: such a window is new, written as its delta
alone. An attempt of B before a crash, deciding from the same stream time, wrote that very value,
so a replay writes it again unchanged. This holds while the stream is the store's only writer
besides the expire job (which only deletes), the apply cache's condition, so it is used only
with the cache on (statestore.stream.batch_apply).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial

from statestore.core.config import CassandraConfig
from statestore.core.model import StoreSpec, WindowedEntry
from statestore.store.tables import window_table_for
from statestore.stream.apply import SLICE, ApplyStats, Delta, Timer, advance, slices_applier, timed, write_all

WindowKey = tuple[bytes, int]  # (key, window start)


def plan_window_writes(
    current: dict[WindowKey, WindowedEntry], deltas: Iterable[tuple[int, Delta]], batch_id: int
) -> tuple[list[WindowedEntry], int]:
    """Pure: the window rows batch `batch_id` writes for (window start, delta) pairs, and how
    many it had already written."""
    writes: list[WindowedEntry] = []
    skipped = 0
    for start, delta in deltas:
        new = advance(current.get((delta.key, start)), delta, batch_id)
        if new is None:
            skipped += 1
        else:
            writes.append(WindowedEntry(delta.key, start, new[0], batch_id, new[1]))
    return writes, skipped


def windows_to_read(deltas: Iterable[tuple[int, Delta]], stream_time_ms: int | None) -> list[WindowKey]:
    """Pure: the (key, window start) pairs a batch must read, all but those starting after
    `stream_time_ms`, which the store cannot hold (see the module doc; None: read them all)."""
    if stream_time_ms is None:
        return [(delta.key, start) for start, delta in deltas]
    return [(delta.key, start) for start, delta in deltas if start <= stream_time_ms]


def apply_window_deltas(
    session,
    spec: StoreSpec,
    batch_id: int,
    deltas: list[tuple[int, Delta]],
    concurrency: int,
    write_ts: int,
    timer: Timer | None = None,
    stream_time_ms: int | None = None,
) -> ApplyStats:
    """Read the batch's windows of its keys (those the store may hold: windows_to_read), then
    write their new absolute values."""
    if not deltas:
        return ApplyStats()
    table = window_table_for(spec)
    windows = windows_to_read(deltas, stream_time_ms)
    current = timed(timer, "read", lambda: table.read(session, windows, concurrency)) if windows else {}
    writes, skipped = timed(timer, "plan", lambda: plan_window_writes(current, deltas, batch_id))
    write_all(batch_id, lambda rows: table.write(session, rows, concurrency, write_ts), writes, timer)
    return ApplyStats.of_slice([d for _, d in deltas], len(writes), skipped, read=len(windows))


def window_deltas_of(rows: Iterable) -> Iterator[list[tuple[int, Delta]]]:
    """A task's rows of (word, delta, last_ms, window_start) as slices of at most SLICE
    (at least one slice, maybe empty, so every task reports its stats)."""
    deltas: list[tuple[int, Delta]] = []
    for row in rows:
        deltas.append((int(row[3]), Delta(row[0].encode("utf-8"), int(row[1]), row[2])))
        if len(deltas) >= SLICE:
            yield deltas
            deltas = []
    yield deltas


def window_applier(
    config: CassandraConfig,
    spec: StoreSpec,
    batch_id: int,
    write_ts: int,
    timer: Timer | None = None,
    stream_time_ms: int | None = None,
):
    """A function over one task's rows of (word, delta, last_ms, window_start), run by
    statestore.stream.apply.run_applier (slices_applier: bounded slices, retried).
    `stream_time_ms`: the store's stream time at the batch's start, when no window after it
    needs reading (None: every window is read)."""
    apply = partial(apply_window_deltas, stream_time_ms=stream_time_ms)
    return slices_applier(config, spec, batch_id, write_ts, window_deltas_of, apply, timer)
