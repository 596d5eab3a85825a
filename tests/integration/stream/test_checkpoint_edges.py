"""Operations on a checkpoint or a store that once gave wrong counts with exit 0 (issue 28):
a checkpoint restored one batch behind the store, a store reset under an old checkpoint, and a
table TTL that the apply cache did not know about. Each ends in exact counts or a refusal
before anything is written."""

from __future__ import annotations

import shutil

import pytest

from statestore.core.config import StreamConfig
from statestore.core.errors import CheckpointMismatchError
from statestore.store import admin
from statestore.store.book import registry
from statestore.stream.job import JobConfig, start
from tests.corpus import generate
from tests.integration.conftest import dump, produce_lines, run_stream, wait_for


def test_a_checkpoint_one_batch_behind_that_replans_the_batch_is_refused(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    checkpoint, older = tmp_path / "cp", tmp_path / "cp-copy"
    first, truth = generate(200, seed=2801)
    produce_lines(kafka_config, topic, first)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint)
    shutil.copytree(checkpoint, older)  # a backup taken between batch 0 and batch 1
    second, more = generate(200, seed=2802)
    produce_lines(kafka_config, topic, second)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint)
    truth += more
    recorded = registry.progress(session, keyspace, store_name)
    assert recorded.last_batch_id == 1
    # The backup restored: Spark no longer knows batch 1 and plans it again, now with more input
    # than the store's batch 1 read.
    shutil.rmtree(checkpoint)
    shutil.copytree(older, checkpoint)
    third, extra = generate(100, seed=2803)
    produce_lines(kafka_config, topic, third)
    with pytest.raises((CheckpointMismatchError, RuntimeError), match=r"batch 1 .*ends at"):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint)
    assert dump(session, keyspace, store_name) == dict(truth)
    after = registry.progress(session, keyspace, store_name)
    assert (after.last_batch_id, after.offsets) == (1, recorded.offsets)
    # The way out the error names: a new checkpoint continuing from the store's position.
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "new", recover_from_store=True)
    assert dump(session, keyspace, store_name) == dict(truth + extra)


def test_a_checkpoint_one_batch_behind_that_replans_the_same_batch_is_a_replay(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    checkpoint, older = tmp_path / "cp", tmp_path / "cp-copy"
    first, truth = generate(200, seed=2804)
    produce_lines(kafka_config, topic, first)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint)
    second, more = generate(200, seed=2805)
    produce_lines(kafka_config, topic, second)
    shutil.copytree(checkpoint, older)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint)
    truth += more
    # Restored with no new input: Spark plans batch 1 with the very offsets the store recorded,
    # which is a replay (every key already carries batch 1) and counts nothing twice.
    shutil.rmtree(checkpoint)
    shutil.copytree(older, checkpoint)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint)
    assert dump(session, keyspace, store_name) == dict(truth)
    assert registry.progress(session, keyspace, store_name).last_batch_id == 1


def test_an_old_checkpoint_after_a_reset_is_refused(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    lines, truth = generate(150, seed=2806)
    produce_lines(kafka_config, topic, lines)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    admin.truncate_store(session, keyspace, store_name)
    more, rest = generate(50, seed=2807)
    produce_lines(kafka_config, topic, more)
    # The old checkpoint would resume after the input it already read, which the reset deleted:
    # the store would hold only the new lines, and --starting-offsets earliest would be ignored.
    with pytest.raises(CheckpointMismatchError, match="holds no batches"):
        run_stream(
            spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", starting_offsets="earliest"
        )
    assert dump(session, keyspace, store_name) == {}
    assert not registry.progress(session, keyspace, store_name).has_batches
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "fresh")
    assert dump(session, keyspace, store_name) == dict(truth + rest)


@pytest.mark.parametrize("driver_apply_records", [0, 1000])
def test_rows_the_table_ttl_expired_are_not_brought_back_by_the_apply_cache(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, driver_apply_records
):
    produce_lines(kafka_config, topic, ["seed"])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    admin.alter_store(session, keyspace, store_name, {"default_time_to_live": 3})
    stream = StreamConfig(
        topic=topic,
        store=store_name,
        checkpoint=str(tmp_path / "cp"),
        trigger="1s",
        driver_apply_records=driver_apply_records,
    )
    running = start(spark, JobConfig(stream, cassandra_config, kafka_config))
    try:
        produce_lines(kafka_config, topic, ["apple apple"])
        wait_for(lambda: dump(session, keyspace, store_name).get("apple") == 2, 60, "apple counted twice")
        wait_for(lambda: "apple" not in dump(session, keyspace, store_name), 30, "apple's row expired")
        recorded = registry.progress(session, keyspace, store_name).last_batch_id
        produce_lines(kafka_config, topic, ["apple"])
        wait_for(
            lambda: (registry.progress(session, keyspace, store_name).last_batch_id or 0) > recorded,
            60,
            "the next batch recorded",
        )
    finally:
        running.stop()
    # What --no-apply-cache gives: the expired row is gone, the new sighting counts 1 (the
    # seed's row was written before the table had a TTL, and stays).
    assert dump(session, keyspace, store_name) == {"apple": 1, "seed": 1}


def test_dead_letters_are_kept_for_the_streams_retention(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    from statestore.conn.cassandra import table_ttl_s
    from statestore.core.names import deadletter_table

    produce_lines(kafka_config, topic, [b"ok words", b"\xff\xfe broken"])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert table_ttl_s(session, keyspace, deadletter_table(store_name)) == 30 * 86_400  # the default
    run_stream(
        spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", dead_letter_retention_ms=3_600_000
    )
    assert table_ttl_s(session, keyspace, deadletter_table(store_name)) == 3_600
    assert dump(session, keyspace, store_name) == {"ok": 1, "words": 1}
