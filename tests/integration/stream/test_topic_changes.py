"""What becomes of the counts when the topic under a stream changes: partitions added, the
topic deleted and created again, input expired before it was read (issue 28). Each ends in
exact counts or a refusal before anything is written, never in input silently skipped."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from statestore.conn import kafka as kafka_io
from statestore.core.config import StreamConfig
from statestore.store.book import registry
from statestore.stream.job import JobConfig, start
from tests.corpus import generate
from tests.integration.conftest import delete_topic, dump, produce_lines, run_stream, wait_for


def _produce_to(kafka_config, topic: str, partition: int, lines) -> None:
    producer = Producer({"bootstrap.servers": kafka_config.bootstrap_servers})
    for line in lines:
        producer.produce(topic, value=line.encode(), partition=partition)
    assert producer.flush(30) == 0


@pytest.mark.parametrize("recovered", [False, True], ids=["same-checkpoint", "recover-from-store"])
def test_partitions_added_between_runs_are_counted_from_their_start(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, recovered
):
    """`recovered`: the checkpoint lost meanwhile, and the stream started on a new one with
    --recover-from-store. Found by the protocol simulator (tests/simulation): it gave Spark the
    store's offsets, which name only the old partitions, and Spark's Kafka source refuses
    specific offsets that do not name every partition: the job failed (exit 1), with no way
    out. Now the new partitions are read from their start (position.naming_partitions)."""
    lines, truth = generate(200, seed=2810)
    produce_lines(kafka_config, topic, lines)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    admin = AdminClient({"bootstrap.servers": kafka_config.bootstrap_servers})
    admin.create_partitions([NewPartitions(topic, 6)])[topic].result(timeout=30)
    wait_for(lambda: kafka_io.partition_count(kafka_config, topic) == 6, 30, "the new partitions")
    more, extra = generate(120, seed=2811)
    _produce_to(kafka_config, topic, 4, more[:60])
    _produce_to(kafka_config, topic, 5, more[60:])
    checkpoint = tmp_path / ("new" if recovered else "cp")
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint, recover_from_store=recovered)
    assert dump(session, keyspace, store_name) == dict(truth + extra)


def _first_commit_reading(events: list[dict], topic: str, partition: int) -> float | None:
    """When (epoch seconds) the first batch that read from `partition` had committed."""
    for event in sorted(events, key=lambda e: e["batchId"]):
        ends = event["sources"][0]["endOffset"]
        ends = json.loads(ends) if isinstance(ends, str) else ends
        starts = event["sources"][0]["startOffset"] or {}
        starts = json.loads(starts) if isinstance(starts, str) else starts
        if ends[topic].get(str(partition), 0) > starts.get(topic, {}).get(str(partition), 0):
            began = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
            return began + event["durationMs"]["triggerExecution"] / 1000
    return None


def test_partitions_added_while_the_stream_runs_are_counted_without_a_restart(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    lines, truth = generate(200, seed=2816)
    produce_lines(kafka_config, topic, lines)
    stream = StreamConfig(topic=topic, store=store_name, checkpoint=str(tmp_path / "cp"), trigger="1s")
    running = start(spark, JobConfig(stream, cassandra_config, kafka_config))
    try:
        wait_for(lambda: dump(session, keyspace, store_name) == dict(truth), 120, "the first lines counted")
        run_id = running.query.runId
        admin = AdminClient({"bootstrap.servers": kafka_config.bootstrap_servers})
        admin.create_partitions([NewPartitions(topic, 6)])[topic].result(timeout=30)
        changed = time.time()
        more, extra = generate(120, seed=2817)
        _produce_to(kafka_config, topic, 4, more[:60])
        _produce_to(kafka_config, topic, 5, more[60:])
        # The running query finds the new partitions itself and reads them from their start.
        wait_for(lambda: dump(session, keyspace, store_name) == dict(truth + extra), 120, "the new partitions counted")
        assert running.query.isActive and running.query.runId == run_id  # never restarted

        # The batch's entries land before it is recorded: its offsets follow its counts.
        def recorded() -> tuple:
            offsets = json.loads(registry.progress(session, keyspace, store_name).offsets)[topic]
            return offsets.get("4"), offsets.get("5")

        wait_for(lambda: recorded() == (60, 60), 60, "the new partitions' offsets recorded")

        # Spark posts a batch's progress event after its commit, so after the counts landed.
        def first_commit() -> float | None:
            return _first_commit_reading([json.loads(p.json) for p in running.query.recentProgress], topic, 4)

        wait_for(lambda: first_commit() is not None, 30, "the progress event of the batch that read partition 4")
        counted = first_commit()
        print(f"from the partition change to partition 4's first counted batch: {counted - changed:.2f} s")
    finally:
        running.stop()


@pytest.mark.parametrize("new_lines", [50, 400], ids=["fewer", "more"])
def test_a_topic_deleted_and_created_again_is_refused(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, new_lines
):
    lines, truth = generate(200, seed=2812)
    produce_lines(kafka_config, topic, lines)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    recorded = registry.progress(session, keyspace, store_name)
    delete_topic(kafka_config, topic)
    wait_for(lambda: kafka_io.partition_count(kafka_config, topic) is None, 30, "the topic gone")
    kafka_io.ensure_topic(kafka_config, topic, 4)
    again, _ = generate(new_lines, seed=2813)
    produce_lines(kafka_config, topic, again)
    # The old checkpoint's offsets mean nothing in the new topic: with more records than they
    # name, resuming from them would skip the new topic's first records without a word.
    with pytest.raises(Exception, match="deleted and created again"):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert dump(session, keyspace, store_name) == dict(truth)
    assert registry.progress(session, keyspace, store_name).last_batch_id == recorded.last_batch_id


def test_input_deleted_before_it_was_read_fails_the_stream_and_counts_nothing_of_it(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    lines, truth = generate(200, seed=2814)
    produce_lines(kafka_config, topic, lines)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    more, _ = generate(200, seed=2815)
    produce_lines(kafka_config, topic, more)
    # Retention (or an operator) deletes records the store has not read yet.
    ends = kafka_io.end_offsets(kafka_config, topic)
    admin = AdminClient({"bootstrap.servers": kafka_config.bootstrap_servers})
    cut = [TopicPartition(topic, p, end) for p, end in ends.items()]
    for future in admin.delete_records(cut).values():
        future.result(timeout=30)
    # Spark's failOnDataLoss stays on: the query fails rather than skip what is gone.
    with pytest.raises(RuntimeError, match=r"(?i)data ?loss|offset.*(deleted|out of range)|some data may have been"):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert dump(session, keyspace, store_name) == dict(truth)
