"""The word count end to end: Kafka -> Spark -> Cassandra, checked against ground truth."""

from __future__ import annotations

from collections import Counter

import pytest

from statestore.core.errors import CheckpointMismatchError, StoreMismatchError
from statestore.store.book import deadletters, registry
from tests.corpus import generate
from tests.integration.conftest import dump, produce_lines, run_stream


@pytest.mark.parametrize("store_type", ["partitioned-kv", "global-kv"])
def test_counts_equal_ground_truth_and_accumulate(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, store_type
):
    lines, truth = generate(3000, seed=11)
    produce_lines(kafka_config, topic, lines)
    progress, _ = run_stream(
        spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", store_type=store_type
    )
    assert dump(session, keyspace, store_name) == dict(truth)
    spec = registry.lookup(session, keyspace, store_name)
    assert spec.store_type.value == store_type
    assert spec.partitions == 4  # the topic's partition count

    # Restart from the same checkpoint with more input: only the new lines are read, and
    # the counts grow by exactly their words.
    more, more_truth = generate(1000, seed=12)
    produce_lines(kafka_config, topic, more)
    progress, applier = run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert progress["numInputRows"] == len(more)
    assert dump(session, keyspace, store_name) == dict(truth + more_truth)
    assert applier.last.stats.skipped == 0


def test_restart_with_nothing_new_reads_nothing(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    lines, truth = generate(200, seed=3)
    produce_lines(kafka_config, topic, lines)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    last = registry.progress(session, keyspace, store_name).last_batch_id
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert registry.progress(session, keyspace, store_name).last_batch_id == last
    assert dump(session, keyspace, store_name) == dict(truth)


def test_invalid_utf8_and_null_values_are_dead_lettered_not_counted(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    long_word = "w" * 70_000  # over Cassandra's 64 KiB key limit
    values = [
        b"good words here",
        b"caf\xc3\xa9 ok",
        b"bad \xff\xfe bytes never counted",
        None,
        b"",
        f"fine {long_word} also fine".encode(),
    ]
    produce_lines(kafka_config, topic, values)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert dump(session, keyspace, store_name) == {
        "good": 1,
        "words": 1,
        "here": 1,
        "café": 1,
        "ok": 1,
        "fine": 2,
        "also": 1,
    }
    letters = sorted(deadletters.read_all(session, keyspace, store_name), key=lambda d: d.reason)
    assert [(d.reason, d.topic) for d in letters] == [
        (deadletters.INVALID_UTF8, topic),
        (deadletters.KEY_TOO_LONG, topic),
        (deadletters.NULL_VALUE, topic),
    ]
    by_reason = {d.reason: d for d in letters}
    assert by_reason[deadletters.INVALID_UTF8].raw == b"bad \xff\xfe bytes never counted"
    assert by_reason[deadletters.NULL_VALUE].raw is None
    assert "70000 bytes" in by_reason[deadletters.KEY_TOO_LONG].detail
    assert all(d.kafka_offset >= 0 and d.kafka_timestamp_ms for d in letters)


def test_lost_checkpoint_is_refused_and_nothing_is_written(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    lines, truth = generate(300, seed=5)
    produce_lines(kafka_config, topic, lines)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    # A new checkpoint restarts batch ids at 0 and would re-read the topic from the start.
    with pytest.raises(CheckpointMismatchError, match="the checkpoint is new") as refused:
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "other-cp")
    assert "--recover-from-store" in str(refused.value) and f"statestore reset {store_name}" in str(refused.value)
    assert dump(session, keyspace, store_name) == dict(truth)

    # Recovering from the store's position with the new checkpoint: only new input is read.
    more, more_truth = generate(100, seed=6)
    produce_lines(kafka_config, topic, more)
    progress, _ = run_stream(
        spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "other-cp", recover_from_store=True
    )
    assert progress["numInputRows"] == len(more)
    assert dump(session, keyspace, store_name) == dict(truth + more_truth)
    # From then on the new checkpoint is the store's own: a plain restart works.
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "other-cp")
    # ...and the old one is refused as replaced.
    with pytest.raises(CheckpointMismatchError, match="the checkpoint was replaced"):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")


def test_existing_store_cannot_change_type(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    produce_lines(kafka_config, topic, ["one line"])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    with pytest.raises(StoreMismatchError, match="already exists as partitioned-kv"):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", store_type="global-kv")
    assert Counter(dump(session, keyspace, store_name)) == Counter({"one": 1, "line": 1})
