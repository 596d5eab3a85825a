"""The apply cache on the real stack: batches read only what their executor cannot vouch for,
and never trust it across a restart or a write from outside the stream (apply_cache doc)."""

from __future__ import annotations

from collections import Counter

from statestore.core.codecs import decode_long, encode_text
from statestore.store.book import registry
from statestore.store.builder import open_store
from statestore.store.tables import table_for
from statestore.stream.writer import DRIVER, EXECUTORS
from tests.corpus import generate
from tests.integration.conftest import dump, produce_lines, run_batches, run_stream


def test_batches_of_a_new_store_read_nothing_and_count_exactly(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    lines, truth = generate(2000, seed=31)
    produce_lines(kafka_config, topic, lines)
    # Every batch on the executors (their Python workers keep the files).
    results = run_batches(
        spark,
        cassandra_config,
        kafka_config,
        topic,
        store_name,
        tmp_path / "cp",
        max_offsets_per_trigger=400,
        driver_apply_records=0,
    )
    assert len(results) >= 4
    assert {r.applied_on for r in results} == {EXECUTORS}
    assert dump(session, keyspace, store_name) == dict(truth)
    # A new store: every bucket file starts complete, so no batch reads a key from Cassandra,
    # and every bucket that had keys reported its token.
    assert [r.stats.read for r in results] == [0] * len(results)
    assert all(r.stats.cache_tokens for r in results)

    # The same input into another store without the cache: every key is read.
    uncached = run_batches(
        spark,
        cassandra_config,
        kafka_config,
        topic,
        store_name + "_x",
        tmp_path / "cp2",
        max_offsets_per_trigger=400,
        apply_cache=False,
        driver_apply_records=0,
    )
    assert [r.stats.read for r in uncached] == [r.stats.keys for r in uncached]
    assert dump(session, keyspace, store_name + "_x") == dict(truth)


def test_the_driver_applying_a_small_batch_trusts_the_files_the_executors_finished(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    """In local mode the driver opens the executors' bucket files: after two batches on the
    executors, the small last batch (500 records, under the limit of 600) reads nothing, as it
    would on the executors. (On a cluster the driver's files are its own: their tokens differ,
    so they are emptied and the keys read, which the unit tests of the ledger cover.)"""
    lines, truth = generate(2500, seed=37)
    produce_lines(kafka_config, topic, lines)
    results = run_batches(
        spark,
        cassandra_config,
        kafka_config,
        topic,
        store_name,
        tmp_path / "cp",
        max_offsets_per_trigger=1000,
        driver_apply_records=600,
    )
    assert [r.applied_on for r in results] == [EXECUTORS, EXECUTORS, DRIVER]
    assert [r.stats.read for r in results] == [0, 0, 0]  # a new store's files start complete: none emptied
    assert all(r.stats.cache_tokens for r in results)
    assert dump(session, keyspace, store_name) == dict(truth)


def test_a_restart_trusts_nothing_it_cached_before(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    produce_lines(kafka_config, topic, ["alpha beta"] * 50)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    # Between runs another program sets a count (the files on the executor still say 50).
    open_store(session, keyspace, store_name).put("alpha", 1000)
    produce_lines(kafka_config, topic, ["alpha"] * 5)
    _, applier = run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    assert dump(session, keyspace, store_name) == {"alpha": 1005, "beta": 50}
    assert applier.last.stats.read == 1  # the new run's first batch read its key


def test_deletes_marked_as_outside_writes_are_seen_by_the_next_batch(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    produce_lines(kafka_config, topic, ["alpha beta"] * 40)
    deleted = Counter()

    def expire_alpha_after_the_first_batch(result):
        if deleted:
            return
        spec = registry.lookup(session, keyspace, store_name)
        table = table_for(spec)
        deleted["alpha"] = decode_long(table.get(session, encode_text("alpha")).value)
        # What the expire job does around its deletes (statestore.maintenance.expire.entries).
        registry.mark_outside_writes(session, spec, ongoing=True, now_us=1_000)
        table.delete(session, encode_text("alpha"))
        registry.mark_outside_writes(session, spec, ongoing=False, now_us=2_000)

    results = run_batches(
        spark,
        cassandra_config,
        kafka_config,
        topic,
        store_name,
        tmp_path / "cp",
        on_batch=expire_alpha_after_the_first_batch,
        max_offsets_per_trigger=10,
    )
    assert len(results) >= 3 and 0 < deleted["alpha"] < 40
    assert {r.applied_on for r in results} == {DRIVER}  # 10 records a batch: the cache's rules on the driver
    # The expired word counts again from zero; a trusted cache would have brought it back.
    assert dump(session, keyspace, store_name) == {"alpha": 40 - deleted["alpha"], "beta": 40}
    assert results[1].stats.read == results[1].stats.keys  # nothing trusted right after the expiry
    assert results[2].stats.read == 0  # and trusted again from the batch after


def test_the_sweep_batch_keeps_every_file_the_next_batch_trusts(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    from statestore.stream.apply_cache import SWEEP_EVERY

    lines, truth = generate(40 * (SWEEP_EVERY + 3), seed=37)
    produce_lines(kafka_config, topic, lines)
    results = run_batches(
        spark,
        cassandra_config,
        kafka_config,
        topic,
        store_name,
        tmp_path / "cp",
        max_offsets_per_trigger=40,
        driver_apply_records=0,
    )
    # Batch SWEEP_EVERY removed what no plan trusts (nothing, here: one executor keeps every
    # bucket), and the batches after it still read nothing from Cassandra.
    assert len(results) > SWEEP_EVERY + 1
    assert [r.stats.read for r in results] == [0] * len(results)
    assert dump(session, keyspace, store_name) == dict(truth)
