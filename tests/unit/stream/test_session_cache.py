"""The session apply with the apply cache, pure: batch after batch of on-time and late-ish event
times, planned on the cache's records (statestore.stream.session_cache) and on what a read of
the store returns, against sessionizing every counted event at once."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import SessionEntry
from statestore.core.windows import SessionSpec
from statestore.stream.apply import Delta
from statestore.stream.apply_sessions import (
    KeyTimes,
    covered_sessions,
    new_sessions,
    plan_covered,
    plan_session_change,
)
from statestore.stream.session_cache import (
    EVERYTHING_FROM,
    after_change,
    decode_record,
    encode_record,
    touchable_from,
)
from tests.unit.stream.test_session_plan import brute_force

GAP, GRACE = 10, 15
SPEC = SessionSpec(GAP, grace_ms=GRACE, retention_ms=86_400_000)
KEYS = (b"a", b"b", b"c")


def entry(key: bytes, start: int, end: int, count: int, batch: int | None = 1, time: int | None = None):
    return SessionEntry(key, start, end, encode_long(count), batch, end if time is None else time)


def test_a_record_keeps_its_coverage_and_sessions_whole():
    written_elsewhere = SessionEntry(b"k", 50, 70, encode_long(4), None, None)  # no batch, no time
    sessions = [written_elsewhere, entry(b"k", 10, 20, 2, 7, 19)]
    from_ms, back = decode_record(b"k", encode_record(5, sessions))
    assert from_ms == 5
    assert back == sorted(sessions, key=lambda e: e.end_ms)
    assert decode_record(b"k", encode_record(EVERYTHING_FROM, [])) == (EVERYTHING_FROM, [])


def test_a_change_drops_what_no_later_batch_can_touch_and_raises_the_coverage():
    """At stream time 100 a record on time is at least 85 (grace 15) and joins sessions ending at
    75 or later (gap 10): the rest goes, and the record vouches from 75 on."""
    old, kept = entry(b"k", 10, 74, 3), entry(b"k", 70, 80, 2)
    new = entry(b"k", 90, 95, 1, batch=2)
    from_ms, sessions = decode_record(b"k", after_change(SPEC, 0, [old, kept], (), (new,), 100))
    assert touchable_from(SPEC, 100) == 75 and from_ms == 75
    assert [(s.start_ms, s.end_ms) for s in sessions] == [(70, 80), (90, 95)]
    # A session a batch replaced is gone from the record.
    _, sessions = decode_record(b"k", after_change(SPEC, 0, [kept, new], (kept, new), (entry(b"k", 70, 95, 4),), 100))
    assert [(s.start_ms, s.end_ms) for s in sessions] == [(70, 95)]


def test_a_session_at_the_expiry_bound_that_a_record_can_still_join_is_kept_and_joined():
    """Retention gap + grace: at stream time 100 a session ending at 75 is expired for readers,
    yet an on-time event at 85 is within the gap of it; the record keeps it and the batch joins
    it, as sessionizing every record would."""
    tight = SessionSpec(GAP, grace_ms=GRACE, retention_ms=GAP + GRACE)
    boundary = entry(b"k", 60, 75, 5)
    deltas = [KeyTimes(Delta(b"k", 1, 85), (85,))]
    changes, records, _ = plan_covered(tight, 3, deltas, [(70, [boundary])], 100)
    assert changes[0].deletes == (boundary,)
    assert [(w.start_ms, w.end_ms, decode_long(w.value)) for w in changes[0].writes] == [(60, 85, 6)]
    assert decode_record(b"k", records[0][1]) == (75, [changes[0].writes[0]])


def test_a_key_an_earlier_attempt_already_changed_gets_a_record_that_vouches_for_nothing():
    """A run again of the batch reads the key's change half landed, maybe (a LOGGED batch across
    partitions): it skips the key, and the next batch reads it rather than trust that read."""
    done = entry(b"k", 80, 90, 3, batch=4)
    stale = entry(b"k", 70, 75, 2, batch=2)  # replaced by `done`, its delete not landed yet
    deltas = [KeyTimes(Delta(b"k", 1, 90), (90,))]
    changes, records, skipped = plan_covered(SPEC, 4, deltas, [(60, [stale, done])], 100)
    assert (changes, skipped) == ([], 1)
    next_batch = [KeyTimes(Delta(b"k", 1, 95), (95,))]
    covered, asks = covered_sessions(SPEC, next_batch, [records[0][1]], unknown=[], stream_time_ms=100)
    assert covered == [None] and asks == [(b"k", 85, 2**63 - 1)]


def test_a_record_keeps_values_of_any_codec_as_stored():
    """Only a session a batch joins is decoded: a record keeps the others' bytes whatever they are."""
    odd = SessionEntry(b"k", 1, 2, b"\x00text of another codec", 1, 2)
    assert decode_record(b"k", encode_record(0, [odd, entry(b"k", 10, 20, 7)]))[1] == [odd, entry(b"k", 10, 20, 7)]


def test_what_the_records_and_the_stream_time_settle_and_what_is_read():
    deltas = [KeyTimes(Delta(k, 1, t), (t,)) for k, t in ((b"a", 80), (b"b", 80), (b"c", 80), (b"d", 200))]
    records = [encode_record(60, []), encode_record(75, []), None, None]
    covered, asks = covered_sessions(SPEC, deltas, records, unknown=[2, 3], stream_time_ms=100)
    # a: its times reach back to 70, the record vouches from 60; b: the record only from 75, so
    # it is read from 70 on; c: no record; d: reaches back to 190, after the stream time.
    assert covered == [(60, []), None, None, (190, [])]
    assert asks == [(b"b", 70, 2**63 - 1), (b"c", 70, 2**63 - 1)]
    # A complete file: a key it has no record of has no session at all.
    covered, asks = covered_sessions(SPEC, deltas, records, unknown=[], stream_time_ms=100)
    assert covered[2] == (EVERYTHING_FROM, []) and asks == [(b"b", 70, 2**63 - 1)]


class Store:
    """A session store in memory: every key's sessions, read as the table's find_many reads."""

    def __init__(self) -> None:
        self.rows: dict[bytes, dict[tuple[int, int], SessionEntry]] = defaultdict(dict)

    def find(self, key: bytes, earliest_end: int, latest_start: int) -> list[SessionEntry]:
        rows = self.rows[key].values()
        return [e for e in rows if e.end_ms >= earliest_end and e.start_ms <= latest_start]

    def apply(self, change) -> None:
        for e in change.deletes:
            del self.rows[e.key][(e.start_ms, e.end_ms)]
        for e in change.writes:
            self.rows[e.key][(e.start_ms, e.end_ms)] = e

    def counts(self) -> dict[bytes, dict[tuple[int, int], int]]:
        return {k: {s: decode_long(e.value) for s, e in rows.items()} for k, rows in self.rows.items() if rows}


def cached_batch(store: Store, files: dict[bytes, bytes], complete: bool, batch, deltas, stream_time) -> int:
    """One batch as apply_sessions plans it with a trusted file (`files`: its records); returns
    how many keys it read."""
    records = [files.get(d.delta.key) for d in deltas]
    unknown = [] if complete else [i for i, r in enumerate(records) if r is None]
    covered, asks = covered_sessions(SPEC, deltas, records, unknown, stream_time)
    answers = iter(asks)
    covered = [known or (lambda ask: (ask[1], store.find(*ask)))(next(answers)) for known in covered]
    changes, new_records, _ = plan_covered(SPEC, batch, deltas, covered, stream_time)
    for change in changes:
        store.apply(change)
    files.update(new_records)
    return len(asks)


def read_batch(store: Store, batch, deltas, stream_time) -> None:
    """The same batch as apply_sessions plans it without the cache: every key's touchable sessions read."""
    for delta, times, _ in deltas:
        current = store.find(delta.key, times[0] - GAP, times[-1] + GAP)
        change = plan_session_change(delta.key, current, times, GAP, batch) if current else None
        store.apply(change or new_sessions(delta.key, times, GAP, batch))


events = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(-40, 30)), min_size=1, max_size=12)
batches = st.lists(st.tuples(events, st.booleans()), min_size=1, max_size=10)


@settings(max_examples=300, deadline=None)
@given(batches, st.booleans())
def test_cached_batches_count_as_reading_batches_do_and_as_sessionizing_everything(run, complete):
    """Each batch's times lie around the stream time (offsets from it; some late, which the job
    leaves out as dead letters), and before some batches the file is not trusted (a restart: it
    starts empty, not complete): the cached plan and the reading plan leave the same store, equal
    to the sessions of every counted time, and a file that started complete and stayed trusted
    never reads."""
    cached, reading, files = Store(), Store(), {}
    counted: dict[bytes, list[int]] = defaultdict(list)
    stream_time = None
    reads = restarted = 0
    for batch, (events, restart) in enumerate(run, start=1):
        if restart and batch > 1:
            files, complete, restarted = {}, False, restarted + 1
        base = 1_000 if stream_time is None else stream_time
        times: dict[bytes, list[int]] = defaultdict(list)
        for key, offset in events:
            t = base + offset
            if stream_time is not None and t + GRACE < stream_time:
                continue  # late
            times[key].append(t)
        deltas = [KeyTimes(Delta(k, len(ts), max(ts)), tuple(sorted(ts))) for k, ts in sorted(times.items())]
        reads += cached_batch(cached, files, complete, batch, deltas, stream_time)
        read_batch(reading, batch, deltas, stream_time)
        for key, ts in times.items():
            counted[key].extend(ts)
        stream_time = max([*(t for ts in times.values() for t in ts), *([] if stream_time is None else [stream_time])])
        assert cached.counts() == reading.counts()
    assert cached.counts() == {k: brute_force(ts, GAP) for k, ts in counted.items()}
    if complete and not restarted:
        assert reads == 0
