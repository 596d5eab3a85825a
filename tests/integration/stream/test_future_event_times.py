"""A record whose Kafka time is far ahead of the clock (a producer whose clock is wrong) must
not move a store's stream time: it is a dead letter with reason `future`, counted nowhere,
and every later on-time record still counts (issue 28, item 3). The batch's clock is its
write timestamp, which a replay reuses, so a replay decides the same."""

from __future__ import annotations

import random
import time
from collections import Counter

from statestore.conn import kafka as kafka_io
from statestore.core.codecs import millis_of
from statestore.core.event_time import TimedValue
from statestore.store.book import deadletters, registry
from tests.integration.conftest import dump, run_stream
from tests.integration.maintenance.test_maintenance_validate_timed import _validate
from tests.integration.stream.test_windowed_wordcount import Reference, _records, _stored

MINUTE = 60_000
AHEAD = 50 * MINUTE  # a Kafka 4 broker takes up to 1 h ahead by default


def _produce(kafka_config, topic, records) -> None:
    kafka_io.produce(kafka_config, topic, [TimedValue(text.encode(), t) for t, text in records])


def _letters(session, keyspace, store) -> list[deadletters.DeadLetter]:
    return list(deadletters.read_all(session, keyspace, store))


def _stream_time(session, keyspace, store) -> int | None:
    moment = registry.progress(session, keyspace, store).max_event_time
    return None if moment is None else millis_of(moment)


def test_a_record_far_ahead_of_the_clock_leaves_a_window_stores_stream_time_alone(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    rng = random.Random(28)
    now = int(time.time() * 1000) // MINUTE * MINUTE
    reference = Reference(MINUTE, MINUTE, 0, 86_400_000)
    first = _records(rng, 200, now - 8 * MINUTE, now - 5 * MINUTE, "a")
    future = (now + AHEAD, "river weir fromthefuture")
    # A second run: later on-time records, none late by the on-time stream time.
    second = _records(rng, 200, now - 5 * MINUTE, now - 2 * MINUTE, "b")
    _produce(kafka_config, topic, [*first[:100], future, *first[100:]])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", window=MINUTE)
    reference.batch(first)  # the future record counts nowhere
    after_first = _stream_time(session, keyspace, store_name)
    _produce(kafka_config, topic, second)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", window=MINUTE)
    reference.batch(second)

    assert not reference.late
    assert sum(reference.counts.values()) == sum(len(text.split()) for _, text in first + second)
    assert _stored(session, keyspace, store_name) == reference.counts
    letters = _letters(session, keyspace, store_name)
    assert [(d.reason, d.raw.decode(), d.kafka_timestamp_ms) for d in letters] == [
        (deadletters.FUTURE, future[1], future[0])
    ]
    assert after_first == max(t for t, _ in first)
    # Validation's recount leaves the future record out as the stream did.
    code, report = _validate(keyspace, store_name, tmp_path / "validate", "--no-quality")
    assert (code, report["status"]) == (0, "pass")
    assert _stream_time(session, keyspace, store_name) == max(t for t, _ in second)


def test_a_record_far_ahead_of_the_clock_is_not_counted_in_a_key_value_store(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    now = int(time.time() * 1000)
    on_time = [(now - 60_000 + i, f"heron mill w{i % 7}") for i in range(300)]
    future = (now + AHEAD, "heron fromthefuture")
    _produce(kafka_config, topic, [*on_time[:150], future, *on_time[150:]])
    # On the executors (the driver's apply of small batches is the other test's path).
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", driver_apply_records=0)

    expected = Counter(word for _, text in on_time for word in text.split())
    assert dump(session, keyspace, store_name) == expected
    letters = _letters(session, keyspace, store_name)
    assert [(d.reason, d.raw.decode()) for d in letters] == [(deadletters.FUTURE, future[1])]
    assert _stream_time(session, keyspace, store_name) == max(t for t, _ in on_time)
    code, report = _validate(keyspace, store_name, tmp_path / "validate", "--no-quality")
    assert (code, report["status"]) == (0, "pass")


def test_the_tolerance_is_the_streams_max_future_setting(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    now = int(time.time() * 1000)
    # Two minutes ahead: within the default 5 minutes, beyond a --max-future of 1m.
    _produce(kafka_config, topic, [(now - 1_000, "kite"), (now + 2 * MINUTE, "kite soon")])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", max_future_ms=MINUTE)
    assert dump(session, keyspace, store_name) == {"kite": 1}
    assert [d.reason for d in _letters(session, keyspace, store_name)] == [deadletters.FUTURE]
    _produce(kafka_config, topic, [(now + 2 * MINUTE, "kite soon")])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")  # the default, 5m
    assert dump(session, keyspace, store_name) == {"kite": 2, "soon": 1}
