"""The replay-safe apply of one micro-batch's event times to a session store.

Per key, batch B reads the key's sessions that its times could touch (ending at or after its
first time - gap, starting at or before its last time + gap), merges the times into them
(statestore.core.windows.merge_into_sessions: a merge replaces the sessions it joins) and
writes the change, deletes and new sessions with batch_id = B (within one Cassandra partition
one batch statement; across partitions the sessions first, the deletes after:
statestore.store.tables.partitioned_session). A session's value is its event count: the sum
of the sessions it merged plus its new events.

Replays: every change of B writes the sessions holding B's times, with batch_id = B, and
those lie in the range B reads. A key whose range holds a session of a later batch is skipped.
A session of B was written by an earlier attempt of B (a task attempt that died, or one still
running beside this one), which deletes the sessions a merged one replaces only once it is
written (partitioned_session.write_plan). So what a read sees of a key is B's change not begun,
or some of its sessions written with some of what each replaces still there, whatever order
its writes landed in: the sessions within one of B's are deleted now, B's times within one
are counted there, and the rest of its times plan as if that session were not there, which
plans the rest of the earlier attempt's change again, the same rows at the same timestamp
(issue 45 item 3: a LOGGED batch across partitions, seen with the replaced session deleted and
the merged one still in the batch log, let a new attempt merge its times again, and the batch
log landed the old merge too). Stored sessions of a key are always more than the gap apart
(each batch merges what it joins), which is what keeps the read range enough: only B's own
times can bridge sessions, and each session a merge replaces is within the gap of one of them.

Keys that cannot touch a stored session are not read: every session the stream wrote ends at an
event time it counted, so at or before the store's stream time (recorded with the previous
batch); a key whose first time in the batch is more than the gap after it joins none of them and
only adds sessions. A crashed attempt of B decided the same from the same stream time, so a
replay writes the same new sessions again (it cannot tell them done, and need not). As for
windows (statestore.stream.apply_windows), only while the stream is the store's only writer
besides the expire job, i.e. with the apply cache on.

The apply cache (statestore.stream.apply_cache) serves session stores with the same trust
rules as key-value ones: a trusted file holds, per key, every session from a coverage time on
(statestore.stream.session_cache), and a key whose times reach back no further than that is
planned on the file's record, not read (covered_sessions).

Retries: a slice's read and plan are retried as a whole until its first write is sent; from
then on a retry re-sends exactly the same changes at the same write timestamp
(planned_then_written), which gives the same rows whatever lands first, and never reads again
(a read after a timed-out write would plan from part of it, which the rule above now makes
safe too).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple, Protocol, TypeVar

from statestore.conn.cassandra import session_for
from statestore.conn.retry import with_retries
from statestore.core.codecs import decode_long, encode_long
from statestore.core.config import CassandraConfig
from statestore.core.model import SessionEntry, StoreSpec
from statestore.core.windows import Session, SessionSpec, merge_into_sessions
from statestore.store.tables import session_table_for
from statestore.store.tables.partitioned_session import PartitionedSessionTable, SessionChange
from statestore.stream.apply import ApplyStats, Delta, Timer, cached_task, sliced, timed, write_all
from statestore.stream.apply_cache import BucketCache, CachePlan, expiring_keys, remember_unless_expiring
from statestore.stream.session_cache import EVERYTHING_FROM, after_change, decode_record, vouching_for_nothing

P = TypeVar("P")
_LATEST = 2**63 - 1  # no bound on a session's start: a cached key's record holds all its sessions from a time on


class KeyTimes(NamedTuple):
    """A key's delta (count, latest time, apply-cache bucket) and its event times, ascending
    (the word count: one per occurrence). An aggregate session store's key has each distinct
    time once, with the partial accumulators of its records at that time in `partials`."""

    delta: Delta
    times: tuple[int, ...]
    partials: Mapping[int, tuple] | None = None

    @property
    def bucket(self) -> int | None:
        return self.delta.bucket


# A session's value from the batch's times within it and the stored sessions it merges.
Fold = Callable[[Sequence[int], Sequence[SessionEntry]], bytes]


def count_of(inside: Sequence[int], parts: Sequence[SessionEntry]) -> bytes:
    """The word count's session value: its events, one per time, plus the sessions it merges."""
    count = len(inside)
    for part in parts:
        count += decode_long(part.value)
    return encode_long(count)


class SessionValues(Protocol):
    """What a session store's value is: the fold of each key's sessions (Fold)."""

    def fold_for(self, key_times: KeyTimes) -> Fold:
        """The fold of `key_times`' sessions."""


class Counts:
    """The word count's session values (count_of)."""

    def fold_for(self, key_times: KeyTimes) -> Fold:
        return count_of


COUNTS = Counts()


class SessionRows(Protocol):
    """The I/O of a session apply, behind which the planning runs: the real table
    (TableRows), or the protocol simulator's fake Cassandra (tests/simulation)."""

    def find_many(self, asks: list[tuple[bytes, int, int]]) -> dict[bytes, list[SessionEntry]]:
        """Per (key, earliest end, latest start): the key's sessions in those bounds (a Found,
        telling the keys of which a session carries a TTL, when the reader can tell)."""

    def apply(self, changes: list[SessionChange], write_ts: int) -> None:
        """Write the changes at `write_ts` (PartitionedSessionTable.apply)."""


class TableRows:
    """SessionRows over a session table on a Cassandra session, `concurrency` requests in flight
    (a table noting TTLs, `noting_ttl()`, for the cached apply)."""

    def __init__(self, session, table: PartitionedSessionTable, concurrency: int) -> None:
        self.session, self.table, self.concurrency = session, table, concurrency

    def find_many(self, asks: list[tuple[bytes, int, int]]) -> dict[bytes, list[SessionEntry]]:
        return self.table.find_many(self.session, asks, self.table.segments(self.session), self.concurrency)

    def apply(self, changes: list[SessionChange], write_ts: int) -> None:
        self.table.apply(self.session, changes, self.concurrency, write_ts)


def plan_session_change(
    key: bytes,
    current: list[SessionEntry],
    times: Iterable[int],
    gap_ms: int,
    batch_id: int,
    fold: Fold = count_of,
) -> SessionChange | None:
    """Pure: the change batch `batch_id` makes to `key`'s sessions `current` (those its times
    could touch) with events at `times`, or None when earlier attempts of the batch made all
    of it (or a later batch wrote the key). A session `current` holds of this batch was
    written by an earlier attempt, which deletes what it replaced only after writing it
    (partitioned_session.write_plan): the sessions within it are deleted now, the times within
    it are counted in it, and the rest of the times plan as if it were not there (see the
    module doc, Replays). `fold`: a session's value (the word count's: its events)."""
    if any(e.batch_id is not None and e.batch_id > batch_id for e in current):
        return None
    done = [e for e in current if e.batch_id == batch_id]
    if done:
        return _completed(key, current, done, times, gap_ms, batch_id, fold)
    times = sorted(times)
    stored = {Session(e.start_ms, e.end_ms): e for e in current}
    now, replaced = merge_into_sessions(list(stored), times, gap_ms)
    writes = []
    for merged in now:
        inside = [t for t in times if merged.start_ms <= t <= merged.end_ms]
        parts = [e for s, e in stored.items() if merged.start_ms <= s.start_ms and s.end_ms <= merged.end_ms]
        if not inside and len(parts) == 1:
            continue  # an existing session the batch did not touch
        latest = max([*inside, *(e.time_ms for e in parts if e.time_ms is not None)])
        writes.append(SessionEntry(key, merged.start_ms, merged.end_ms, fold(inside, parts), batch_id, latest))
    return SessionChange(tuple(stored[s] for s in replaced), tuple(writes))


def _completed(
    key: bytes,
    current: list[SessionEntry],
    done: list[SessionEntry],
    times: Iterable[int],
    gap_ms: int,
    batch_id: int,
    fold: Fold,
) -> SessionChange | None:
    """plan_session_change over a key an earlier attempt of the batch changed in part: its
    sessions `done` stay, the others within one of them are deleted, the rest plans anew."""

    def within(start: int, end: int) -> bool:
        return any(d.start_ms <= start and end <= d.end_ms for d in done)

    left = [e for e in current if e.batch_id != batch_id and within(e.start_ms, e.end_ms)]
    rest = [e for e in current if e.batch_id != batch_id and not within(e.start_ms, e.end_ms)]
    rest_times = [t for t in times if not within(t, t)]
    more = plan_session_change(key, rest, rest_times, gap_ms, batch_id, fold) if rest_times else None
    deletes = tuple(left) + (more.deletes if more else ())
    writes = more.writes if more else ()
    return SessionChange(deletes, writes) if deletes or writes else None


def new_sessions(
    key: bytes, times: tuple[int, ...], gap_ms: int, batch_id: int, fold: Fold = count_of
) -> SessionChange:
    """Pure: plan_session_change for a key with no stored session its times touch (most keys of
    a batch past the stream time): its times, ascending, cut where two neighbours are more than
    `gap_ms` apart, each run one session folding its times."""
    if len(times) == 1:  # most keys of a batch
        only = times[0]
        return SessionChange((), (SessionEntry(key, only, only, fold(times, ()), batch_id, only),))
    writes = []
    run = [times[0]]
    for t in times[1:]:
        if t - run[-1] > gap_ms:
            writes.append(SessionEntry(key, run[0], run[-1], fold(run, ()), batch_id, run[-1]))
            run = []
        run.append(t)
    writes.append(SessionEntry(key, run[0], run[-1], fold(run, ()), batch_id, run[-1]))
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
        for delta, times, *_ in deltas
        if stream_time_ms is None or times[0] - gap_ms <= stream_time_ms
    ]


def plan_session_deltas(
    rows: SessionRows,
    spec: StoreSpec,
    batch_id: int,
    deltas: list[KeyTimes],
    timer=None,
    stream_time_ms: int | None = None,
    values: SessionValues = COUNTS,
) -> tuple[list[SessionChange], int, int]:
    """Read the sessions the batch's times could touch and plan each key's change: (changes,
    keys an earlier attempt of the batch already changed, keys read)."""
    gap = spec.windowing.gap_ms
    asks = session_reads(deltas, gap, stream_time_ms)
    current = timed(timer, "read", lambda: rows.find_many(asks)) if asks else {}
    changes, skipped = [], 0
    for key_times in deltas:
        key, times = key_times.delta.key, key_times.times
        change = key_change(key, current.get(key), times, gap, batch_id, values.fold_for(key_times))
        if change is None:
            skipped += 1
        else:
            changes.append(change)
    return changes, skipped, len(asks)


def key_change(
    key: bytes,
    current: list[SessionEntry] | None,
    times: tuple[int, ...],
    gap_ms: int,
    batch_id: int,
    fold: Fold = count_of,
) -> SessionChange | None:
    """Pure: the change batch `batch_id` makes to `key` over its sessions `current` (those its
    times could touch; none: new_sessions), or None when an earlier attempt of the batch made it."""
    if not current:
        return new_sessions(key, times, gap_ms, batch_id, fold)
    return plan_session_change(key, current, times, gap_ms, batch_id, fold)


def covered_sessions(
    spec: SessionSpec,
    deltas: list[KeyTimes],
    records: list[bytes | None],
    unknown: Iterable[int],
    stream_time_ms: int | None,
) -> tuple[list[tuple[int, list[SessionEntry]] | None], list[tuple[bytes, int, int]]]:
    """Pure: per key, (coverage, sessions) where the apply cache's `records` (None: none; the
    positions in `unknown` have none the file vouches for) or the stream time settle what the
    store holds of it, else None; and the reads the others need (key, earliest end, no bound on
    the start: all its sessions from the earliest end its times reach, which become its record).
    A key whose times reach back no further than its record's coverage uses the record; one the
    file has no record of, and which is not unknown, has no session at all (a complete file); one
    whose earliest end is after the stream time has none it can touch (see the module doc)."""
    unknown = set(unknown)
    covered: list[tuple[int, list[SessionEntry]] | None] = []
    asks = []
    for i, key_times in enumerate(deltas):
        delta, times = key_times.delta, key_times.times
        earliest_end = times[0] - spec.gap_ms
        if records[i] is not None:
            from_ms, sessions = decode_record(delta.key, records[i])
            if earliest_end >= from_ms:
                covered.append((from_ms, sessions))
                continue
        elif i not in unknown:
            covered.append((EVERYTHING_FROM, []))
            continue
        if stream_time_ms is not None and earliest_end > stream_time_ms:
            covered.append((earliest_end, []))
            continue
        covered.append(None)
        asks.append((delta.key, earliest_end, _LATEST))
    return covered, asks


def plan_covered(
    spec: SessionSpec,
    batch_id: int,
    deltas: list[KeyTimes],
    covered: list[tuple[int, list[SessionEntry]]],
    stream_time_ms: int | None,
    values: SessionValues = COUNTS,
) -> tuple[list[SessionChange], list[tuple[bytes, bytes]], int]:
    """Pure: each key's change over its (coverage, sessions), as plan_session_change decides on
    the sessions its times could touch; (changes, the keys' records once the changes are
    written, keys an earlier attempt of the batch already changed). The record of a key an
    earlier attempt changed, all of it or part, vouches for nothing: what was read of it may
    have been that change half landed, with another attempt still writing."""
    changes, records, skipped = [], [], 0
    gap = spec.gap_ms
    for key_times, (from_ms, sessions) in zip(deltas, covered, strict=True):
        delta, times = key_times.delta, key_times.times
        low, high = times[0] - gap, times[-1] + gap
        current = [s for s in sessions if s.end_ms >= low and s.start_ms <= high]
        change = key_change(delta.key, current, times, gap, batch_id, values.fold_for(key_times))
        if change is None:
            skipped += 1
            records.append((delta.key, vouching_for_nothing()))
            continue
        changes.append(change)
        if any(s.batch_id is not None and s.batch_id >= batch_id for s in current):
            records.append((delta.key, vouching_for_nothing()))  # completing an earlier attempt's change
            continue
        record = after_change(spec, from_ms, sessions, change.deletes, change.writes, stream_time_ms)
        records.append((delta.key, record))
    return changes, records, skipped


def plan_cached_session_deltas(
    rows: SessionRows,
    spec: StoreSpec,
    batch_id: int,
    deltas: list[KeyTimes],
    cache: BucketCache,
    timer=None,
    stream_time_ms: int | None = None,
    values: SessionValues = COUNTS,
) -> tuple[list[SessionChange], list[tuple[bytes, bytes]], Collection[bytes], int, int]:
    """plan_session_deltas with the keys' bucket file: read only the keys it cannot vouch for
    (covered_sessions); (changes, the keys' records after them, the keys read carrying a TTL
    (expiring_keys: their records are not to be kept), keys skipped, keys read)."""
    records, unknown = timed(timer, "cache", lambda: cache.lookup([d.delta.key for d in deltas]))
    covered, asks = covered_sessions(spec.windowing, deltas, records, unknown, stream_time_ms)
    expiring = ()
    if asks:
        found = timed(timer, "read", lambda: rows.find_many(asks))
        expiring = expiring_keys(found)
        pending = iter(asks)
        for i, known in enumerate(covered):
            if known is None:
                key, earliest_end, _ = next(pending)
                covered[i] = (earliest_end, found.get(key, []))
    changes, new_records, skipped = timed(
        timer, "plan", lambda: plan_covered(spec.windowing, batch_id, deltas, covered, stream_time_ms, values)
    )
    return changes, new_records, expiring, skipped, len(asks)


def apply_session_deltas(
    rows: SessionRows,
    spec: StoreSpec,
    batch_id: int,
    deltas: list[KeyTimes],
    write_ts: int,
    timer=None,
    retry: Callable[[Callable], object] = lambda action: action(),
    stream_time_ms: int | None = None,
    cache: BucketCache | None = None,
    values: SessionValues = COUNTS,
) -> ApplyStats:
    """Read the sessions the batch's times could touch (of the keys session_reads names, or
    with `cache`, the keys' bucket file, of those it cannot vouch for), then write each key's
    change, then keep each key's record in `cache` (none of a key read carrying a TTL:
    remember_unless_expiring); `retry` runs the plan and the write
    (planned_then_written: a retried write re-sends the same changes; default: no retry).
    `values`: what a session's value is (the word count's event counts, or an aggregate
    store's measures: statestore.stream.session_aggregates)."""
    if not deltas:
        return ApplyStats()

    def write(planned) -> None:
        write_all(batch_id, lambda changes: rows.apply(changes, write_ts), planned[0], timer)

    if cache is None:
        changes, skipped, read = planned_then_written(
            lambda: plan_session_deltas(rows, spec, batch_id, deltas, timer, stream_time_ms, values),
            write,
            retry,
        )
    else:
        changes, records, expiring, skipped, read = planned_then_written(
            lambda: plan_cached_session_deltas(rows, spec, batch_id, deltas, cache, timer, stream_time_ms, values),
            write,
            retry,
        )
        timed(timer, "cache", lambda: remember_unless_expiring(cache, records, expiring))
    return ApplyStats.of_slice([d.delta for d in deltas], len(changes), skipped, read=read)


def session_deltas_of(rows: Iterable) -> Iterator[list[KeyTimes]]:
    """A task's rows of (word, delta, last_ms, times[, bucket]) as slices of KeyTimes (apply.sliced)."""
    return sliced(
        KeyTimes(Delta(row[0].encode("utf-8"), int(row[1]), row[2], row[4] if len(row) > 4 else None), tuple(row[3]))
        for row in rows
    )


def session_applier(
    config: CassandraConfig,
    spec: StoreSpec,
    batch_id: int,
    write_ts: int,
    timer: Timer | None = None,
    stream_time_ms: int | None = None,
    cache: CachePlan | None = None,
    values: SessionValues = COUNTS,
    slices: Callable[[Iterable], Iterator[list[KeyTimes]]] = session_deltas_of,
):
    """A function over one task's rows of (word, delta, last_ms, times[, bucket]), run by
    statestore.stream.apply.run_applier: bounded slices, each planned then written, each step
    retried on transient Cassandra errors within the retry budget (planned_then_written; not
    apply.slices_applier, whose retry of a whole slice reads again). `stream_time_ms`: the
    store's stream time at the batch's start, when keys that cannot reach back to it need no
    read (None: every key is read). `cache`: the batch's apply-cache plan (rows then carry their
    bucket; apply.cached_task opens each bucket's file and finishes it). `values` and `slices`:
    another store's session values and rows (statestore.stream.session_aggregates)."""

    def apply_one(part: list[KeyTimes], file: BucketCache | None = None) -> ApplyStats:
        def retry(action):
            return with_retries(config, f"applying batch {batch_id} to store {spec.name}", action)

        table = session_table_for(spec) if file is None else session_table_for(spec).noting_ttl()
        rows = TableRows(session_for(config), table, config.write_concurrency)
        return apply_session_deltas(rows, spec, batch_id, part, write_ts, timer, retry, stream_time_ms, file, values)

    def apply_partition(rows: Iterator) -> Iterator[ApplyStats]:
        if cache is None:
            yield timed(timer, "task", lambda: sum((apply_one(part) for part in slices(rows)), ApplyStats()))
        else:
            yield timed(timer, "task", lambda: cached_task(slices(rows), cache, apply_one))

    return apply_partition
