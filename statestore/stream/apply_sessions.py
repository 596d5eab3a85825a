"""The replay-safe apply of one micro-batch's event times to a session store.

Per key, batch B reads the key's sessions that its times could touch (ending at or after its
first time - gap, starting at or before its last time + gap), merges the times into them
(statestore.core.windows.merge_into_sessions: a merge replaces the sessions it joins) and
writes the change, deletes and new sessions with batch_id = B, as one batch statement
(statestore.store.tables.partitioned_session: LOGGED across Cassandra partitions, so it lands
whole). A session's value is its event count: the sum of the sessions it merged plus its new
events.

Replays: every change of B writes at least the session holding B's times, with batch_id = B,
and that session lies in the range B reads. So a key whose range holds a session written by B
or later was done by an earlier attempt of B and is skipped; any other key is untouched by B
(its change is all or nothing) and is applied now. Stored sessions of a key are always more
than the gap apart (each batch merges what it joins), which is what keeps the read range
enough: only B's own times can bridge sessions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from statestore.core.codecs import decode_long, encode_long
from statestore.core.config import CassandraConfig
from statestore.core.model import SessionEntry, StoreSpec
from statestore.core.windows import Session, merge_into_sessions
from statestore.store.tables import session_table_for
from statestore.store.tables.partitioned_session import SessionChange
from statestore.stream.apply import SLICE, ApplyStats, Delta, Timer, slices_applier, timed, write_all

KeyTimes = tuple[Delta, tuple[int, ...]]  # a key's delta (count, latest time) and its event times


def plan_session_change(
    key: bytes, current: list[SessionEntry], times: Iterable[int], gap_ms: int, batch_id: int
) -> SessionChange | None:
    """Pure: the change batch `batch_id` makes to `key`'s sessions `current` (those its times
    could touch) with events at `times`, or None when an earlier attempt of the batch made it."""
    if any(e.batch_id is not None and e.batch_id >= batch_id for e in current):
        return None
    times = sorted(times)
    stored = {Session(e.start_ms, e.end_ms): e for e in current}
    now, replaced = merge_into_sessions(list(stored), times, gap_ms)
    writes = []
    for merged in now:
        inside = [t for t in times if merged.start_ms <= t <= merged.end_ms]
        parts = [e for s, e in stored.items() if merged.start_ms <= s.start_ms and s.end_ms <= merged.end_ms]
        if not inside and len(parts) == 1:
            continue  # an existing session the batch did not touch
        count = len(inside) + sum(decode_long(e.value) for e in parts)
        latest = max([*inside, *(e.time_ms for e in parts if e.time_ms is not None)])
        writes.append(SessionEntry(key, merged.start_ms, merged.end_ms, encode_long(count), batch_id, latest))
    return SessionChange(tuple(stored[s] for s in replaced), tuple(writes))


def apply_session_deltas(
    session, spec: StoreSpec, batch_id: int, deltas: list[KeyTimes], concurrency: int, write_ts: int, timer=None
) -> ApplyStats:
    """Read the sessions the batch's times could touch, then write each key's change."""
    if not deltas:
        return ApplyStats()
    table = session_table_for(spec)
    gap = spec.windowing.gap_ms
    asks = [(delta.key, times[0] - gap, times[-1] + gap) for delta, times in deltas]

    def read():
        return table.find_many(session, asks, table.segments(session), concurrency)

    current = timed(timer, "read", read)
    changes, skipped = [], 0
    for delta, times in deltas:
        change = plan_session_change(delta.key, current.get(delta.key, []), times, gap, batch_id)
        if change is None:
            skipped += 1
        else:
            changes.append(change)
    write_all(batch_id, lambda rows: table.apply(session, rows, concurrency, write_ts), changes, timer)
    return ApplyStats.of_slice([d for d, _ in deltas], len(changes), skipped, read=len(asks))


def session_deltas_of(rows: Iterable) -> Iterator[list[KeyTimes]]:
    """A task's rows of (word, delta, last_ms, times) as slices of at most SLICE keys (at least
    one slice, maybe empty, so every task reports its stats)."""
    deltas: list[KeyTimes] = []
    for row in rows:
        deltas.append((Delta(row[0].encode("utf-8"), int(row[1]), row[2]), tuple(row[3])))
        if len(deltas) >= SLICE:
            yield deltas
            deltas = []
    yield deltas


def session_applier(config: CassandraConfig, spec: StoreSpec, batch_id: int, write_ts: int, timer: Timer | None = None):
    """A function over one task's rows of (word, delta, last_ms, times), run by
    statestore.stream.apply.run_applier (slices_applier: bounded slices, retried)."""
    return slices_applier(config, spec, batch_id, write_ts, session_deltas_of, apply_session_deltas, timer)
