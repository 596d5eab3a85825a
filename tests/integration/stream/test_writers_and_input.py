"""One writer per store, the reset command, and bad input of every kind."""

from __future__ import annotations

import time

import pytest

from statestore.cli.main import main as cli
from statestore.core.config import StreamConfig
from statestore.store.book import deadletters, registry
from statestore.store.book.lease import LeaseHeldError, StoreLease, current_holder
from statestore.stream.job import JobConfig, start
from tests.corpus import generate
from tests.integration.conftest import dump, produce_lines, run_stream


def _job(cassandra_config, kafka_config, topic, store, checkpoint, **overrides):
    stream = StreamConfig(topic=topic, store=store, checkpoint=str(checkpoint), **overrides)
    return JobConfig(stream, cassandra_config, kafka_config)


def test_a_second_writer_fails_fast_naming_the_holder(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    first = start(spark, _job(cassandra_config, kafka_config, topic, store_name, tmp_path / "a", trigger="1s"))
    try:
        began = time.monotonic()
        with pytest.raises(LeaseHeldError, match=f"store '{store_name}' is being written by") as held:
            start(spark, _job(cassandra_config, kafka_config, topic, store_name, tmp_path / "b"))
        assert time.monotonic() - began < 5  # another checkpoint: no waiting
        assert first.lease.holder in str(held.value) and str(tmp_path / "a") in str(held.value)
        with pytest.raises(LeaseHeldError, match="stop that query before resetting"):
            _reset(keyspace, store_name)
    finally:
        first.stop()
    assert current_holder(session, keyspace, store_name) is None  # released on stop
    lines, truth = generate(100, seed=8)
    produce_lines(kafka_config, topic, lines)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "a")
    assert dump(session, keyspace, store_name) == dict(truth)


def _reset(keyspace, store):
    from statestore.conn.cassandra import session_for
    from statestore.core.config import CassandraConfig, resolve
    from statestore.store import admin

    session = session_for(resolve(CassandraConfig, overrides={"keyspace": keyspace}))
    admin.truncate_store(session, keyspace, store, verb="resetting")


def test_a_restart_takes_over_the_lease_of_a_crashed_writer(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    produce_lines(kafka_config, topic, ["takeover works"])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    # A writer that crashed: it took the lease for this checkpoint and never renews it.
    crashed = StoreLease(session, keyspace, store_name, str(tmp_path / "cp"), ttl_s=4)
    crashed.acquire()
    began = time.monotonic()
    produce_lines(kafka_config, topic, ["takeover works again"])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", lease_ttl_s=4)
    assert time.monotonic() - began >= 2  # it waited for the dead holder's lease to expire
    assert dump(session, keyspace, store_name) == {"takeover": 2, "works": 2, "again": 1}


def test_reset_empties_the_store_and_a_new_checkpoint_starts_over(
    spark, capsys, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    lines, truth = generate(150, seed=9)
    produce_lines(kafka_config, topic, lines)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert cli(["reset", store_name, "--keyspace", keyspace]) == 4  # refused: needs --yes
    assert "add --yes" in capsys.readouterr().err
    assert cli(["reset", store_name, "--yes", "--keyspace", keyspace]) == 0
    assert dump(session, keyspace, store_name) == {}
    assert not registry.progress(session, keyspace, store_name).has_batches
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "fresh")
    assert dump(session, keyspace, store_name) == dict(truth)


def test_bad_input_of_every_kind_is_kept_and_the_rest_counted_exactly(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    big_line = ("alpha beta " * 100_000).encode()  # 1.1 MB of valid text
    big_invalid = b"gamma " * 200_000 + b"\xc3\x28"  # 1.2 MB, invalid at the very end
    long_word = "z" * 70_000
    values = [
        b"plain words",
        None,
        b"",
        b"\xff\xfe\xfd",
        b"half valid \xe2\x82 then broken",
        big_line,
        big_invalid,
        f"short {long_word} short".encode(),
        "naïve café 河流".encode(),
    ]
    produce_lines(kafka_config, topic, values)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert dump(session, keyspace, store_name) == {
        "plain": 1,
        "words": 1,
        "alpha": 100_000,
        "beta": 100_000,
        "short": 2,
        "naïve": 1,
        "café": 1,
        "河流": 1,
    }
    letters = {
        (d.kafka_partition, d.kafka_offset, d.reason): d for d in deadletters.read_all(session, keyspace, store_name)
    }
    by_reason = sorted((reason, len(d.raw or b"")) for (_, _, reason), d in letters.items())
    assert by_reason == sorted(
        [
            (deadletters.NULL_VALUE, 0),
            (deadletters.INVALID_UTF8, 3),
            (deadletters.INVALID_UTF8, len(values[4])),
            (deadletters.INVALID_UTF8, len(big_invalid)),
            (deadletters.KEY_TOO_LONG, len(values[7])),
        ]
    )
    raws = {d.raw for d in letters.values()}
    assert big_invalid in raws and values[4] in raws  # the raw bytes, whole
