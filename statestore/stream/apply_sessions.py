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

Keys that cannot touch a stored session are not read: every session the stream wrote ends at an
event time it counted, so at or before the store's stream time (recorded with the previous
batch); a key whose first time in the batch is more than the gap after it joins none of them and
only adds sessions. A crashed attempt of B decided the same from the same stream time, so a
replay writes the same new sessions again (it cannot tell them done, and need not). As for
windows (statestore.stream.apply_windows), only while the stream is the store's only writer
besides the expire job, i.e. with the apply cache on.

Retries: a LOGGED batch that times out has an unknown outcome for a while
(write type BATCH: the batch log holds it and Cassandra will apply all of it; BATCH_LOG: a
batch log replica may still replay it), and a read in between can see part of it, the
replaced sessions gone and the merged one not yet there, which a new plan would merge again.
So a slice's read and plan are retried as a whole until its first write is sent; from then on
a retry re-sends exactly the same changes at the same write timestamp (planned_then_written),
which gives the same rows whatever lands first, and never reads again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from statestore.conn.cassandra import session_for
from statestore.conn.retry import with_retries
from statestore.core.codecs import decode_long, encode_long
from statestore.core.config import CassandraConfig
from statestore.core.model import SessionEntry, StoreSpec
from statestore.core.windows import Session, merge_into_sessions
from statestore.store.tables import session_table_for
from statestore.store.tables.partitioned_session import SessionChange
from statestore.stream.apply import SLICE, ApplyStats, Delta, Timer, timed, write_all

P = TypeVar("P")

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


def new_sessions(key: bytes, times: tuple[int, ...], gap_ms: int, batch_id: int) -> SessionChange:
    """Pure: plan_session_change for a key with no stored session its times touch (most keys of
    a batch past the stream time): its times, ascending, cut where two neighbours are more than
    `gap_ms` apart, each run one session counting its events."""
    writes = []
    start = previous = times[0]
    count = 0
    for t in times:
        if t - previous > gap_ms:
            writes.append(SessionEntry(key, start, previous, encode_long(count), batch_id, previous))
            start, count = t, 0
        previous = t
        count += 1
    writes.append(SessionEntry(key, start, previous, encode_long(count), batch_id, previous))
    return SessionChange((), tuple(writes))


def planned_then_written(plan: Callable[[], P], write: Callable[[P], None], retry: Callable[[Callable], object]) -> P:
    """Pure, the retry rule of a slice: `plan()` (reads, then plans) retried as a whole, then
    `write(planned)` retried with that same plan, never planned again: a timed-out write may
    still land, and a read before it has can see part of it."""
    planned = retry(plan)
    retry(lambda: write(planned))
    return planned


def session_reads(deltas: Iterable[KeyTimes], gap_ms: int, stream_time_ms: int | None) -> list[tuple[bytes, int, int]]:
    """Pure: (key, earliest end, latest start) of the sessions each key's times could touch,
    for the keys whose first time is within the gap of `stream_time_ms` (the others cannot
    touch a stored session: see the module doc; None: every key)."""
    return [
        (delta.key, times[0] - gap_ms, times[-1] + gap_ms)
        for delta, times in deltas
        if stream_time_ms is None or times[0] - gap_ms <= stream_time_ms
    ]


def plan_session_deltas(
    session,
    spec: StoreSpec,
    batch_id: int,
    deltas: list[KeyTimes],
    concurrency: int,
    timer=None,
    stream_time_ms: int | None = None,
) -> tuple[list[SessionChange], int, int]:
    """Read the sessions the batch's times could touch and plan each key's change: (changes,
    keys an earlier attempt of the batch already changed, keys read)."""
    table = session_table_for(spec)
    gap = spec.windowing.gap_ms
    asks = session_reads(deltas, gap, stream_time_ms)

    def read():
        return table.find_many(session, asks, table.segments(session), concurrency)

    current = timed(timer, "read", read) if asks else {}
    changes, skipped = [], 0
    for delta, times in deltas:
        stored = current.get(delta.key)
        if not stored:
            changes.append(new_sessions(delta.key, times, gap, batch_id))
            continue
        change = plan_session_change(delta.key, stored, times, gap, batch_id)
        if change is None:
            skipped += 1
        else:
            changes.append(change)
    return changes, skipped, len(asks)


def apply_session_deltas(
    session,
    spec: StoreSpec,
    batch_id: int,
    deltas: list[KeyTimes],
    concurrency: int,
    write_ts: int,
    timer=None,
    retry: Callable[[Callable], object] = lambda action: action(),
    stream_time_ms: int | None = None,
) -> ApplyStats:
    """Read the sessions the batch's times could touch (of the keys session_reads names),
    then write each key's change; `retry` runs the plan and the write (planned_then_written:
    a retried write re-sends the same changes; default: no retry)."""
    if not deltas:
        return ApplyStats()
    table = session_table_for(spec)
    changes, skipped, read = planned_then_written(
        lambda: plan_session_deltas(session, spec, batch_id, deltas, concurrency, timer, stream_time_ms),
        lambda planned: write_all(
            batch_id, lambda rows: table.apply(session, rows, concurrency, write_ts), planned[0], timer
        ),
        retry,
    )
    return ApplyStats.of_slice([d for d, _ in deltas], len(changes), skipped, read=read)


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


def session_applier(
    config: CassandraConfig,
    spec: StoreSpec,
    batch_id: int,
    write_ts: int,
    timer: Timer | None = None,
    stream_time_ms: int | None = None,
):
    """A function over one task's rows of (word, delta, last_ms, times), run by
    statestore.stream.apply.run_applier: bounded slices, each planned then written, each step
    retried on transient Cassandra errors within the retry budget (planned_then_written; not
    apply.slices_applier, whose retry of a whole slice reads again). `stream_time_ms`: the
    store's stream time at the batch's start, when keys that cannot reach back to it need no
    read (None: every key is read)."""

    def apply_one(part: list[KeyTimes]) -> ApplyStats:
        def retry(action):
            return with_retries(config, f"applying batch {batch_id} to store {spec.name}", action)

        session = session_for(config)
        return apply_session_deltas(
            session, spec, batch_id, part, config.write_concurrency, write_ts, timer, retry, stream_time_ms
        )

    def apply_partition(rows: Iterator) -> Iterator[ApplyStats]:
        yield timed(timer, "task", lambda: sum((apply_one(part) for part in session_deltas_of(rows)), ApplyStats()))

    return apply_partition
