"""The apply cache serving session stores on the real stack: a key's sessions this executor wrote
at the previous batch are not read again, and nothing is trusted across a restart
(statestore.stream.apply_sessions, statestore.stream.session_cache)."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from statestore.store.builder import open_session_store
from statestore.store.session import SessionKey
from statestore.stream.writer import DRIVER, EXECUTORS
from tests.integration.conftest import run_batches
from tests.integration.stream.test_apply_cache_windows import _produce
from tests.integration.stream.test_session_wordcount import BASE_MS, WORDS, sessions_of

MINUTE = 60_000
GAP = 30_000


@pytest.fixture
def topic(ordered_topic):
    """Every batch reads the next records in time order (conftest's ordered_topic)."""
    return ordered_topic


def _stored(session, keyspace, store) -> dict[str, dict[tuple[int, int], int]]:
    out: dict[str, dict[tuple[int, int], int]] = defaultdict(dict)
    for s in open_session_store(session, keyspace, store).all():
        out[s.key][(s.start_ms, s.end_ms)] = s.value
    return dict(out)


def test_session_batches_of_a_new_store_read_nothing_and_count_exactly(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    """An hour of time-ordered records in bursts (sessions end in the quiet stretches), many
    batches on the executors: every batch finds each key's sessions in its bucket's file (a new
    store's files start complete and stay trusted), so none reads, and the store holds the
    sessions of sessionizing every record at once."""
    rng = random.Random(7301)
    records = []
    for i in range(2_000):
        t = BASE_MS + rng.randrange(0, 60 * MINUTE)
        if (t - BASE_MS) % (2 * MINUTE) > 80_000:
            continue  # 40 quiet seconds of every 2 minutes
        records.append((t, f"{' '.join(rng.choices(WORDS, k=rng.randint(1, 3)))} t{i}"))
    records.sort()
    _produce(kafka_config, topic, records)
    times: dict[str, list[int]] = defaultdict(list)
    for t, text in records:
        for word in text.split():
            times[word].append(t)
    truth = {word: sessions_of(ts, GAP) for word, ts in times.items()}

    run = {"max_offsets_per_trigger": 150, "driver_apply_records": 0, "session_gap": GAP, "grace": 10 * MINUTE}
    results = run_batches(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **run)
    assert len(results) >= 8 and {r.applied_on for r in results} == {EXECUTORS}
    assert _stored(session, keyspace, store_name) == truth
    assert [r.stats.read for r in results] == [0] * len(results)
    assert all(r.stats.cache_tokens for r in results)


def test_a_restart_reads_the_sessions_it_cached_before(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    """Between runs another program grows a session the files of the first run still hold: the
    new run's first batch trusts no file, reads the key and merges into the session as stored;
    a key whose times are past the gap of the stream time is not read."""
    windows = {"session_gap": GAP, "grace": 10 * MINUTE}  # small batches: applied by the driver, with its files
    _produce(kafka_config, topic, [(BASE_MS + 1_000, "river stone")] * 20)
    run_batches(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **windows)
    store = open_session_store(session, keyspace, store_name)
    store.put(SessionKey("river", BASE_MS + 1_000, BASE_MS + 1_000), 100)
    _produce(kafka_config, topic, [(BASE_MS + 2_000, "river"), (BASE_MS + 5 * MINUTE, "heron")] * 3)
    results = run_batches(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **windows)
    assert _stored(session, keyspace, store_name) == {
        "river": {(BASE_MS + 1_000, BASE_MS + 2_000): 103},
        "stone": {(BASE_MS + 1_000, BASE_MS + 1_000): 20},
        "heron": {(BASE_MS + 5 * MINUTE, BASE_MS + 5 * MINUTE): 3},
    }
    assert (results[0].applied_on, results[0].stats.keys, results[0].stats.read) == (DRIVER, 2, 1)
