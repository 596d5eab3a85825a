"""Fencing on the real Cassandra: a writer that took the store's epoch before a newer writer
can record nothing more, and the store's progress never goes back."""

from __future__ import annotations

import uuid

import pytest

from statestore.conn.cassandra import DDL_PROFILE, create_keyspace
from statestore.core.errors import StoreFencedError
from statestore.core.model import StoreSpec, StoreType
from statestore.store.book import registry
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.store.provision import provision_store


def test_a_writer_of_an_older_epoch_is_refused_and_progress_never_goes_back(session, keyspace, store_name):
    spec = provision_store(session, StoreSpec(keyspace, store_name, StoreType.PARTITIONED_KV, 2))
    batch5 = BatchPosition(
        batch_id=5,
        write_ts=500,
        start=KafkaOffsets.parse('{"t":{"0":0}}'),
        end=KafkaOffsets.parse('{"t":{"0":50}}'),
        query_id="q1",
    )
    batch6 = BatchPosition(
        batch_id=6,
        write_ts=600,
        start=KafkaOffsets.parse('{"t":{"0":50}}'),
        end=KafkaOffsets.parse('{"t":{"0":60}}'),
        query_id="q1",
    )
    batch7 = BatchPosition(
        batch_id=7,
        write_ts=700,
        start=KafkaOffsets.parse('{"t":{"0":60}}'),
        end=KafkaOffsets.parse('{"t":{"0":70}}'),
        query_id="q1",
    )
    old = registry.take_epoch(session, spec)
    registry.begin_batch(session, spec, batch5, old)
    new = registry.take_epoch(session, spec)  # a newer writer takes over (the old one is paused)
    assert new == old + 1
    registry.begin_batch(session, spec, batch5, new)
    registry.record_batch(session, spec, batch5, 1_000, new)
    registry.begin_batch(session, spec, batch6, new)
    registry.record_batch(session, spec, batch6, 2_000, new)

    # The paused writer wakes up and finishes its batch 5: refused, nothing changes.
    with pytest.raises(StoreFencedError, match=f"epoch {old}.*epoch {new}"):
        registry.record_batch(session, spec, batch5, 1_000, old)
    with pytest.raises(StoreFencedError):
        registry.begin_batch(session, spec, batch7, old)
    progress = registry.progress(session, keyspace, store_name)
    assert (progress.last_batch_id, progress.last_ts, progress.offsets, progress.epoch) == (
        6,
        600,
        '{"t":{"0":60}}',
        new,
    )
    assert progress.pending_batch_id == 6


def test_max_event_time_only_grows(session, keyspace, store_name):
    spec = provision_store(session, StoreSpec(keyspace, store_name, StoreType.GLOBAL_KV, 1))
    epoch = registry.take_epoch(session, spec)
    batch1, batch2, batch3 = (BatchPosition(batch_id=b, write_ts=b * 100, start=None, end=None) for b in (1, 2, 3))
    registry.record_batch(session, spec, batch1, 5_000, epoch)
    registry.record_batch(session, spec, batch2, 3_000, epoch)  # an older event time
    registry.record_batch(session, spec, batch3, None, epoch)  # no events
    progress = registry.progress(session, keyspace, store_name)
    assert progress.last_batch_id == 3
    assert progress.max_event_time is not None and int(progress.max_event_time.timestamp() * 1000) == 5_000


def test_an_old_registry_gets_the_epoch_column(session):
    keyspace = f"it_old_{uuid.uuid4().hex[:8]}"
    create_keyspace(session, keyspace)
    try:
        _registry_before_fencing(session, keyspace)
        registry.ensure_table(session, keyspace)
        session.cluster.refresh_table_metadata(keyspace, registry.REGISTRY_TABLE)
        assert "epoch" in session.cluster.metadata.keyspaces[keyspace].tables[registry.REGISTRY_TABLE].columns
        registry.ensure_table(session, keyspace)  # again: nothing to add
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", execution_profile=DDL_PROFILE)


def _registry_before_fencing(session, keyspace: str) -> None:
    session.execute(
        f"CREATE TABLE {keyspace}.{registry.REGISTRY_TABLE} (name text PRIMARY KEY, store_type text,"
        " table_name text, partitions int, key_format text, value_format text, created_at timestamp,"
        " source_topic text, last_batch_id bigint, last_batch_at timestamp, max_event_time timestamp,"
        " query_id text, batch_base bigint, offsets text, pending_batch_id bigint, pending_ts bigint,"
        " pending_offsets text, last_ts bigint)",
        execution_profile=DDL_PROFILE,
    )
