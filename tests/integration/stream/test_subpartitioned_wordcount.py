"""The word count into sub-partitioned stores (real Kafka, Spark and Cassandra): exact counts,
and exact again after the store is re-laid out between two runs of the stream; a versioned
store's versions per batch."""

from __future__ import annotations

from statestore.core.partitioner import locations_for
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.builder import open_store
from statestore.store.relayout import relayout_store
from tests.corpus import generate
from tests.integration.conftest import dump, produce_lines, run_stream


def test_counts_are_exact_in_subpartitions_and_across_a_relayout(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    admin.create_store(session, keyspace, store_name, "partitioned-kv", 4, subpartitions=4)
    lines, truth = generate(3000, seed=31)
    produce_lines(kafka_config, topic, lines)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    spec = registry.lookup(session, keyspace, store_name)
    assert (spec.partitions, spec.subpartitions) == (4, 4)  # the stream kept the registered layout
    assert dump(session, keyspace, store_name) == dict(truth)
    # Every word where a reader looks for it: (Kafka's partition, its sub-partition), 14 of the 16 here.
    rows = list(session.execute(f"SELECT partition, subpartition, key FROM {keyspace}.{spec.table}"))
    assert [(r.partition, r.subpartition) for r in rows] == locations_for([r.key for r in rows], 4, 4)
    assert len({(r.partition, r.subpartition) for r in rows}) > 8

    # The stream stopped: re-lay out to 16, then go on from the same checkpoint into the new table.
    relayout_store(session, keyspace, store_name, 16)
    more, more_truth = generate(1000, seed=32)
    produce_lines(kafka_config, topic, more)
    progress, applier = run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert progress["numInputRows"] == len(more)
    spec = registry.lookup(session, keyspace, store_name)
    assert (spec.subpartitions, spec.table) == (16, f"{store_name}_store_r1")
    assert dump(session, keyspace, store_name) == dict(truth + more_truth)
    assert applier.last.stats.skipped == 0


def test_a_versioned_store_in_subpartitions_counts_exactly_with_one_version_per_batch(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    admin.create_store(session, keyspace, store_name, "partitioned-versioned", 4, subpartitions=8)
    first, first_truth = generate(1500, seed=33)
    produce_lines(kafka_config, topic, first)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    more, more_truth = generate(500, seed=34)
    produce_lines(kafka_config, topic, more)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert dump(session, keyspace, store_name) == dict(first_truth + more_truth)
    store = open_store(session, keyspace, store_name)
    for word in more_truth:  # changed by both batches: two versions, the older one closed
        history = store.history(word)
        assert [v.value for v in history] == [first_truth[word], first_truth[word] + more_truth[word]]
