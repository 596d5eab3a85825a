"""A table TTL seen by one run and removed before the next: the rows the first run wrote under it
still expire, and the second run, which never sees the TTL, must not trust cache files holding
them. The registry's `ttl_expiring_until` carries that across runs (apply_cache doc)."""

from __future__ import annotations

import shutil

from statestore.core.config import StreamConfig
from statestore.store import admin
from statestore.store.book import registry
from statestore.stream.job import JobConfig, start
from statestore.stream.writer import BatchSeams
from tests.integration.conftest import dump, produce_lines, run_stream, wait_for

TTL_S = 20  # long enough for the second run to start and replay a batch before the row expires


def test_rows_written_under_a_ttl_removed_between_runs_are_not_brought_back_by_the_apply_cache(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    produce_lines(kafka_config, topic, ["seed"])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    shutil.copytree(tmp_path / "cp", tmp_path / "cp-before-apple")  # a checkpoint one batch back
    # Run 1 writes apple's row under a table TTL.
    admin.alter_store(session, keyspace, store_name, {"default_time_to_live": TTL_S})
    produce_lines(kafka_config, topic, ["apple apple"])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert dump(session, keyspace, store_name) == {"apple": 2, "seed": 1}
    admin.alter_store(session, keyspace, store_name, {"default_time_to_live": 0})

    # Run 2 never sees the TTL. From the older checkpoint Spark runs batch 1 again (recorded as
    # done: nothing applied, position.recorded_done), the row expires, then one more apple comes:
    # the cache, trusting nothing the registry's ttl_expiring_until covers, reads it as gone.
    batches = []
    stream = StreamConfig(topic=topic, store=store_name, checkpoint=str(tmp_path / "cp-before-apple"), trigger="1s")
    running = start(spark, JobConfig(stream, cassandra_config, kafka_config), BatchSeams(on_batch=batches.append))
    try:
        wait_for(lambda: batches, 120, "run 2 to replay batch 1")
        assert dump(session, keyspace, store_name)["apple"] == 2, "apple's row expired before the replay read it"
        wait_for(lambda: "apple" not in dump(session, keyspace, store_name), 3 * TTL_S, "apple's row expired")
        produce_lines(kafka_config, topic, ["apple"])
        wait_for(
            lambda: (registry.progress(session, keyspace, store_name).last_batch_id or 0) >= 2,
            120,
            "batch 2 recorded",
        )
    finally:
        running.stop()
    # What --no-apply-cache gives: the expired row is gone, the new sighting counts 1.
    assert dump(session, keyspace, store_name) == {"apple": 1, "seed": 1}
