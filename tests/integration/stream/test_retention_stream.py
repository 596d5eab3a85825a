"""The word count into a store with a retention, on the real stack: a word whose entry fell past
stream time - retention is absent to readers before any expire job, and when the word comes back
the stream counts it from zero, whether the apply cache vouches for the old entry (on, the
executors' cache) or the apply reads it from Cassandra (off, on the driver)."""

from __future__ import annotations

import uuid

import pytest

from statestore.conn import kafka as kafka_io
from statestore.core.codecs import decode_long, decode_text
from statestore.core.event_time import TimedValue
from statestore.store import admin
from statestore.store.builder import open_store
from statestore.store.tables import table_for
from statestore.stream.writer import DRIVER, EXECUTORS
from tests.integration.conftest import delete_topic, run_batches
from tests.integration.maintenance.test_maintenance_audit import load_job

HOUR = 3_600_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
# Two messages per batch (a one-partition topic, two offsets per trigger), in this order:
RECORDS = [
    (T0, "apple banana apple"),  # batch 0: apple 2, banana 1, date 1, all at T0
    (T0, "date"),
    (T0, "apple"),  # batch 1, stream time T0 (cutoff T0 - 1h): apple 3, still at T0; cherry at T0 + 2h
    (T0 + 2 * HOUR, "cherry"),
    (T0 + 2 * HOUR + 1000, "apple"),  # batch 2, stream time T0 + 2h (cutoff T0 + 1h): apple, banana, date expired
]


@pytest.mark.parametrize(("apply_cache", "driver_records"), [(True, 0), (False, 1000)], ids=["cache", "no-cache"])
def test_a_word_past_the_retention_is_absent_and_counts_from_zero_when_it_returns(
    spark, session, keyspace, cassandra_config, kafka_config, tmp_path, apply_cache, driver_records
):
    store = f"ret_{'c' if apply_cache else 'n'}_{uuid.uuid4().hex[:6]}"
    topic = f"it-retention-{store}"
    admin.create_store(session, keyspace, store, "partitioned-kv", 1, retention_ms=HOUR)
    kafka_io.ensure_topic(kafka_config, topic, 1)
    try:
        kafka_io.produce(kafka_config, topic, [TimedValue(text.encode(), t) for t, text in RECORDS])
        results = _run(
            spark, cassandra_config, kafka_config, topic, store, tmp_path / "cp", apply_cache, driver_records
        )
        if not apply_cache:
            # The recount of the input accepts a word counted anew after its retention (apple:
            # 1 of its 4 occurrences), as it accepts one the expire job removed.
            argv = ["--keyspace", keyspace, "--store", store, "--report-dir", str(tmp_path / "validate")]
            assert load_job("validate_idempotency").main([*argv, "--replay-batches", "0", "--no-quality"]) == 0
    finally:
        delete_topic(kafka_config, topic)

    assert [r.applied_on for r in results] == [EXECUTORS if driver_records == 0 else DRIVER] * 3
    # Batch 2 found apple past the retention: written as new, 1, not 3 + 1.
    reader = open_store(session, keyspace, store)
    assert reader.get("apple") == 1
    assert reader.get("banana") is None  # past the retention: absent, though still stored
    assert dict(reader.all()) == {"apple": 1, "cherry": 1}
    stored = {decode_text(e.key): decode_long(e.value) for e in table_for(reader.spec).scan_sorted(session)}
    assert stored == {"apple": 1, "banana": 1, "cherry": 1, "date": 1}  # no expire job ran: the rows are there
    if apply_cache:
        # The cache vouched for apple's old entry (written by batch 1: nothing read from Cassandra)
        # and still did not bring it back.
        assert results[2].stats.read == 0
    else:
        assert results[2].stats.read == 1


def _run(spark, cassandra_config, kafka_config, topic, store, checkpoint, apply_cache, driver_records) -> list:
    """One available-now run, two records per batch; every batch's result, in order."""
    return run_batches(
        spark,
        cassandra_config,
        kafka_config,
        topic,
        store,
        checkpoint,
        max_offsets_per_trigger=2,
        apply_cache=apply_cache,
        driver_apply_records=driver_records,
    )
