"""Aggregations per key and session (issue 47), without services: the session apply with an
aggregate store's fold, batch after batch with replays, against sessionizing every record at
once (a brute-force truth); the session partials of parsed JSON records through the applier
over a fake session table; the late records by their event time; the settings."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statestore.core import config as cfg
from statestore.core.aggregation import AggregateSpec
from statestore.core.config import CassandraConfig, StreamConfig
from statestore.core.model import SessionEntry, StoreSpec
from statestore.core.windows import SessionSpec
from statestore.store.book import deadletters
from statestore.stream import aggregates, apply_sessions, session_aggregates
from statestore.stream.apply_cache import BucketCache
from statestore.stream.apply_sessions import KeyTimes, apply_session_deltas
from statestore.stream.json_input import JsonInput, parsed_records
from statestore.stream.plan import Delta
from statestore.stream.transforms import with_future_limit

GAP = 10
SESSIONS = SessionSpec(GAP, grace_ms=5)
STORE = StoreSpec("ks", "agg", "partitioned-session", 1, windowing=SESSIONS)
# Every aggregation but distinct (whose partial is Spark's sketch: the Spark test below).
PURE = AggregateSpec.parse(
    "n=count(), total=sum_int(amount), f=sum(amount), lo=min(amount), hi=max(amount), last=latest(tag)"
)


class FakeSessions:
    """SessionRows over a dict: what the session table answers and applies."""

    def __init__(self) -> None:
        self.rows: dict[tuple[bytes, int, int], SessionEntry] = {}

    def find_many(self, asks):
        found = defaultdict(list)
        for key, earliest_end, latest_start in asks:
            for (k, _, _), e in self.rows.items():
                if k == key and e.end_ms >= earliest_end and e.start_ms <= latest_start:
                    found[key].append(e)
        return dict(found)

    def apply(self, changes, write_ts) -> None:
        for change in changes:
            for e in change.deletes:
                self.rows.pop((e.key, e.start_ms, e.end_ms), None)
            for e in change.writes:
                self.rows[(e.key, e.start_ms, e.end_ms)] = e


def _accumulators(spec: AggregateSpec, events) -> tuple:
    """The measures' accumulators of `events` (dicts of amount, tag, time, offset), one by one."""
    merged = spec.identity()
    for e in events:
        partials = []
        for m in spec.measures:
            value = {"count": 1, "latest": (e["t"], 0, e["offset"], e["tag"])}.get(m.kind, e["amount"])
            partials.append(m.aggregation.from_partial(value))
        merged = spec.merge(merged, tuple(partials))
    return merged


def _key_times(spec: AggregateSpec, key: str, events) -> KeyTimes:
    by_time = defaultdict(list)
    for e in events:
        by_time[e["t"]].append(e)
    partials = {t: _accumulators(spec, mine) for t, mine in by_time.items()}
    return KeyTimes(Delta(key.encode(), len(events), max(by_time)), tuple(sorted(partials)), partials)


def _sessionized(events, gap: int) -> dict[tuple[bytes, int, int], list]:
    """Brute force: each key's events by time, a new session wherever neighbours are more than `gap` apart."""
    out: dict[tuple[bytes, int, int], list] = {}
    for key in {e["key"] for e in events}:
        mine = sorted((e for e in events if e["key"] == key), key=lambda e: e["t"])
        run = [mine[0]]
        for e in mine[1:]:
            if e["t"] - run[-1]["t"] > gap:
                out[(key.encode(), run[0]["t"], run[-1]["t"])] = run
                run = []
            run.append(e)
        out[(key.encode(), run[0]["t"], run[-1]["t"])] = run
    return out


EVENT = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["a", "b"]),
        "t": st.integers(0, 200),
        "amount": st.integers(-1000, 1000),
        "tag": st.sampled_from(['"x"', '"y"', '"z"']),  # a JSON value, as the input stage keeps it
    }
)


@given(st.lists(st.lists(EVENT, min_size=1, max_size=10), min_size=1, max_size=6), st.data())
def test_batches_of_records_give_each_sessions_measures_of_all_its_records_and_replays_change_nothing(batches, data):
    fake = FakeSessions()
    values = session_aggregates.MeasureValues(PURE)
    offset = 0
    for events in batches:
        for e in events:
            e["offset"], offset = offset, offset + 1
    for batch_id, events in enumerate(batches, start=1):
        deltas = [_key_times(PURE, k, [e for e in events if e["key"] == k]) for k in sorted({e["key"] for e in events})]
        cached = data.draw(st.booleans(), label="the stream time lets new keys go unread")
        stream_time = max((e["t"] for b in batches[: batch_id - 1] for e in b), default=None) if cached else None
        apply_session_deltas(fake, STORE, batch_id, deltas, 0, stream_time_ms=stream_time, values=values)
        if data.draw(st.booleans(), label="replayed"):
            held = dict(fake.rows)
            replay = apply_session_deltas(fake, STORE, batch_id, deltas, 0, stream_time_ms=stream_time, values=values)
            assert fake.rows == held  # new sessions unread by the stream time are written again, the same
            assert stream_time is not None or replay.written == 0
    everything = [e for events in batches for e in events]
    truth = {where: PURE.finish(_accumulators(PURE, mine)) for where, mine in _sessionized(everything, GAP).items()}
    assert {where: PURE.finish(PURE.unpack(e.value)) for where, e in fake.rows.items()} == truth
    assert all(e.time_ms == e.end_ms for e in fake.rows.values())


def test_the_word_counts_session_values_are_unchanged_by_the_fold():
    fake = FakeSessions()
    deltas = [KeyTimes(Delta(b"k", 3, 9), (1, 1, 9))]
    apply_session_deltas(fake, STORE, 1, deltas, 0)
    apply_session_deltas(fake, STORE, 2, [KeyTimes(Delta(b"k", 1, 15), (15,))], 0)
    ((where, entry),) = fake.rows.items()
    assert where == (b"k", 1, 15) and entry.value == (4).to_bytes(8, "big")
    assert apply_sessions.COUNTS.fold_for(deltas[0]) is apply_sessions.count_of


KAFKA = "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, timestampType int"
KAFKA_MS = 1_795_946_400_000
SPARK_SPEC = AggregateSpec.parse(
    "n=count(), total=sum_int(amount), hi=max(amount), who=distinct(user), last=latest(user)"
)
JSON = JsonInput(SPARK_SPEC, ("shop",), None, "ts")
WIDE = SessionSpec(30_000, grace_ms=10_000)


def _batch(spark, values, first_offset: int = 0):
    when = datetime.fromtimestamp(KAFKA_MS / 1000, UTC)
    rows = [(None, v.encode(), "t", 0, first_offset + i, when, 0) for i, v in enumerate(values)]
    return with_future_limit(spark.createDataFrame(rows, KAFKA), KAFKA_MS * 1000, 300_000)


def _events(seed: int, count: int = 200) -> list[dict]:
    rng = random.Random(seed)
    return [
        {"shop": f"s{rng.randrange(3)}", "user": f"u{rng.randrange(15)}", "amount": rng.randrange(-50, 1000), "ts": t}
        for t in (rng.randrange(0, 600_000) for _ in range(count))
    ]


def _apply_batch(spark, monkeypatch, fake, records, batch_id, stream_time, first_offset):
    """One batch of JSON `records` through session_partials and the aggregate applier into `fake`."""
    monkeypatch.setattr(session_aggregates, "session_applier", _fake_applier(fake))
    parsed = parsed_records(_batch(spark, [json.dumps(r) for r in records], first_offset), JSON)
    partials = session_aggregates.session_partials(parsed, JSON, WIDE, stream_time).toArrow()
    store = StoreSpec("ks", "agg", "partitioned-session", 1, windowing=WIDE, value_codec=SPARK_SPEC.value_format)
    applier = session_aggregates.session_aggregate_applier(CassandraConfig(), store, SPARK_SPEC, batch_id, 0)
    stats = aggregates.run_on_driver(partials, applier)  # as the driver applies a small batch
    return stats, stats.uncountable


def _fake_applier(fake):
    """session_applier's contract over `fake` instead of a Cassandra table."""

    def applier(config, spec, batch_id, write_ts, *, timer, stream_time_ms, cache, values, slices):
        def apply_partition(rows):
            stats = [
                apply_session_deltas(fake, spec, batch_id, part, write_ts, stream_time_ms=stream_time_ms, values=values)
                for part in slices(rows)
            ]
            yield sum(stats, apply_sessions.ApplyStats())

        return apply_partition

    return applier


def test_session_partials_through_the_applier_give_the_brute_force_sessions_of_every_measure(spark, monkeypatch):
    events = _events(7)
    first, second = events[:120], events[120:]
    fake = FakeSessions()
    stats, late = _apply_batch(spark, monkeypatch, fake, first, 1, None, 0)
    assert (stats.words, late) == (120, 0)
    # The second batch at a stream time that leaves the records more than the grace older late.
    stream_time = max(e["ts"] for e in first)
    on_time = [e for e in second if e["ts"] + WIDE.grace_ms >= stream_time]
    assert 0 < len(on_time) < len(second)
    stats, late = _apply_batch(spark, monkeypatch, fake, second, 2, stream_time, 120)
    assert (stats.words, late) == (len(on_time), len(second) - len(on_time))
    counted = [
        dict(e, key=e["shop"], t=e["ts"], offset=i) for i, e in enumerate(first + second) if i < 120 or e in on_time
    ]
    truth = {}
    for where, mine in _sessionized(counted, WIDE.gap_ms).items():
        latest = max(mine, key=lambda e: (e["t"], e["offset"]))
        truth[where] = {
            "n": len(mine),
            "total": sum(e["amount"] for e in mine),
            "hi": float(max(e["amount"] for e in mine)),
            "who": float(len({e["user"] for e in mine})),
            "last": latest["user"],
        }
    stored = {where: SPARK_SPEC.codec.decode(e.value) for where, e in fake.rows.items()}
    assert {w: {**v, "who": round(v["who"])} for w, v in stored.items()} == {
        w: {**v, "who": round(v["who"])} for w, v in truth.items()
    }


def test_late_and_pre_1970_records_are_dead_letters_late_with_their_event_time(spark):
    records = [
        {"shop": "s", "user": "u", "amount": 1, "ts": 100_000},  # on time
        {"shop": "s", "user": "u", "amount": 2, "ts": 50_000},  # 50 s behind: past the 10 s grace
        {"shop": "s", "user": "u", "amount": 3, "ts": -5},  # before 1970
        {"shop": "s", "user": "u"},  # missing_field: its own reason, not late
    ]
    parsed = parsed_records(_batch(spark, [json.dumps(r) for r in records]), JSON)
    late = {r.offset: r for r in session_aggregates.late_letter_rows(parsed, WIDE, 100_000).collect()}
    assert sorted(late) == [1, 2] and {r.reason for r in late.values()} == {deadletters.LATE}
    assert "more than the grace (10s)" in late[1].detail and "(its event time 50000 ms)" in late[1].detail
    assert "before 1970" in late[2].detail
    rows = {r[0]: r[1] for r in session_aggregates.session_partials(parsed, JSON, WIDE, 100_000).collect()}
    assert rows == {"s": 1, None: 3}  # the late ones and the bad one counted under the null key


def test_the_settings_take_session_aggregates():
    base = {"topic": "t", "store": "s", "checkpoint": "/tmp/cp", "input_format": "json", "aggregate": "n=count()"}
    stream = cfg.resolve(StreamConfig, env={}, overrides={**base, "key": "u", "session_gap": 60_000, "grace": 5_000})
    assert stream.windowing == SessionSpec(60_000, 5_000)
    overrides = {**base, "key": "u", "store_type": "partitioned-session", "session_gap": 1_000}
    typed = cfg.resolve(StreamConfig, env={}, overrides=overrides)
    assert typed.store_type == "partitioned-session"


@pytest.mark.parametrize("seed", [1, 2])
def test_a_key_times_row_holds_each_distinct_time_once_with_its_records_merged(seed):
    rng = random.Random(seed)
    times = sorted({rng.randrange(0, 100) for _ in range(5)})
    events = [{"time_ms": t, "m0": 2, "m1": t * 3, "m2": float(t), "m3": None, "m4": None} for t in times]
    key_times = session_aggregates.key_times_of(("k", 2 * len(times), times[-1], events), SPARK_SPEC)
    assert key_times.times == tuple(times) and key_times.delta.amount == 2 * len(times)
    assert {t: SPARK_SPEC.finish(p)["total"] for t, p in key_times.partials.items()} == {t: 3 * t for t in times}


def _through_a_file(fake, path, batch_id, deltas, values, expected, fresh, stream_time):
    """One task's cached apply of `deltas` with its bucket's file at `path`; the file's new token."""
    file = BucketCache(str(path), expected, fresh)
    try:
        stats = apply_session_deltas(
            fake, STORE, batch_id, deltas, 0, stream_time_ms=stream_time, cache=file, values=values
        )
        return stats, file.finish()
    finally:
        file.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(EVENT, min_size=1, max_size=8), st.booleans()), min_size=1, max_size=5))
def test_cached_batches_keep_each_sessions_measures_as_reading_batches_do(tmp_path_factory, run):
    """With the apply cache (a bucket file; some batches after a restart, when the file is not
    trusted), each session's measures equal those of an apply that reads every key, and the
    brute-force truth; a file trusted from the start reads no key once its records hold them."""
    cached, reading = FakeSessions(), FakeSessions()
    values = session_aggregates.MeasureValues(PURE)
    path, token, fresh = tmp_path_factory.mktemp("bucket") / "file", None, True
    counted, stream_time, offset = [], None, 0
    for batch_id, (events, restart) in enumerate(run, start=1):
        base = 1_000 if stream_time is None else stream_time
        for e in events:
            e["t"], e["offset"], offset = base + e["t"] - 100, offset, offset + 1
        on_time = [e for e in events if stream_time is None or e["t"] + SESSIONS.grace_ms >= stream_time]
        if not on_time:
            continue
        deltas = [
            _key_times(PURE, k, [e for e in on_time if e["key"] == k]) for k in sorted({e["key"] for e in on_time})
        ]
        if restart and batch_id > 1:
            token, fresh = "a restart: another token", False
        _, token = _through_a_file(cached, path, batch_id, deltas, values, token, fresh, stream_time)
        fresh = False
        apply_session_deltas(reading, STORE, batch_id, deltas, 0, stream_time_ms=stream_time, values=values)
        counted += on_time
        stream_time = max([e["t"] for e in on_time] + ([] if stream_time is None else [stream_time]))
        assert cached.rows == reading.rows
    truth = {where: PURE.finish(_accumulators(PURE, mine)) for where, mine in _sessionized(counted, GAP).items()}
    assert {where: PURE.finish(PURE.unpack(e.value)) for where, e in cached.rows.items()} == truth
