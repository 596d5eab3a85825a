"""Interactive queries need no RPC layer: a reader computes a key's store partition itself.
Here the library's partition for every key the Spark job wrote equals the partition the job
wrote it to, so a point lookup is one query on the right partition."""

from __future__ import annotations

from statestore.store.builder import open_store
from tests.corpus import generate
from tests.integration.conftest import compaction_class_of, produce_lines, run_stream


def test_reader_finds_every_key_in_the_partition_the_job_wrote(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    lines, truth = generate(800, seed=21)
    produce_lines(kafka_config, topic, lines)
    # Created with the seed library's compaction: the job's --compaction reaches the new table.
    run_stream(
        spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", partitions=6, compaction="lcs"
    )
    store = open_store(session, keyspace, store_name)
    assert compaction_class_of(session, keyspace, store.spec.table).endswith("LeveledCompactionStrategy")
    written = list(session.execute(f"SELECT partition, key FROM {keyspace}.{store.spec.table}"))
    assert len(written) == len(truth)
    assert {row.partition for row in written} == set(range(6))
    assert all(store.table.partition_of(row.key) == row.partition for row in written)
    assert {word: store.get(word) for word in truth} == dict(truth)
