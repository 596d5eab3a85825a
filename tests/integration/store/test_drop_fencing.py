"""A store dropped and created again under its name while a writer of the dropped one is paused
(its lease lapsed): the paused writer must write nothing into the new store. Its registry updates
are conditional on its epoch, and a store's epochs start at a random point (registry.first_epoch),
so the new store's never match an old writer's (they both started at 1 before: the paused writer's
begin_batch was accepted by the new store). Its entry writes are not conditional: a drop is
refused while a batch is begun and not recorded, unless the operator says its writer is stopped."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from cassandra import InvalidRequest

from statestore.conn.cassandra import DDL_PROFILE
from statestore.core.errors import StoreFencedError, WriterMayBeLiveError
from statestore.core.model import StoreSpec, StoreType
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.store.builder import open_store
from statestore.store.provision import provision_store
from statestore.store.relayout import relayout_store
from statestore.stream import job as stream_job


def _position(batch_id: int, write_ts: int) -> BatchPosition:
    return BatchPosition(
        batch_id=batch_id,
        write_ts=write_ts,
        start=KafkaOffsets.parse(f'{{"t":{{"0":{batch_id * 10}}}}}'),
        end=KafkaOffsets.parse(f'{{"t":{{"0":{batch_id * 10 + 10}}}}}'),
        query_id="q-old",
    )


def test_a_writer_of_a_dropped_store_is_fenced_off_the_store_created_again(session, keyspace, store_name):
    spec = StoreSpec(keyspace, store_name, StoreType.PARTITIONED_KV, 2)
    old = provision_store(session, spec)
    paused = registry.take_epoch(session, old)
    registry.begin_batch(session, old, _position(0, 100), paused)
    registry.record_batch(session, old, _position(0, 100), None, paused)
    # The writer pauses between batches; its lease lapses; the store is dropped and made again.
    admin.drop_store(session, keyspace, store_name, confirm=store_name)
    again = provision_store(session, spec)
    taken = registry.take_epoch(session, again)
    assert taken != paused
    # The paused writer wakes up and begins its next batch: refused, nothing recorded.
    with pytest.raises(StoreFencedError):
        registry.begin_batch(session, again, _position(1, 200), paused)
    assert not registry.progress(session, keyspace, store_name).has_batches


def test_a_drop_under_a_batch_in_flight_is_refused_unless_the_writer_is_stopped(session, keyspace, store_name):
    spec = StoreSpec(keyspace, store_name, StoreType.PARTITIONED_KV, 2)
    old = provision_store(session, spec)
    paused = registry.take_epoch(session, old)
    registry.begin_batch(session, old, _position(0, 100), paused)  # then paused mid-batch
    with pytest.raises(WriterMayBeLiveError, match=r"batch 0 was begun and never recorded.*Nothing was dropped"):
        admin.drop_store(session, keyspace, store_name, confirm=store_name)
    assert registry.find(session, keyspace, store_name) is not None
    admin.drop_store(session, keyspace, store_name, confirm=store_name, writer_stopped=True)
    assert registry.find(session, keyspace, store_name) is None


def test_a_store_created_again_after_a_relayout_and_a_drop_starts_empty(session, keyspace, store_name):
    """A re-layout keeps the store's old table (its way back); dropping the store then dropped
    only the table it used, and the store created again under its name found the old table by
    its name (CREATE TABLE IF NOT EXISTS) with every entry of before the re-layout in it (found
    by the simulator: tests/simulation/operator_events.py)."""
    spec = StoreSpec(keyspace, store_name, StoreType.PARTITIONED_KV, 2)
    provision_store(session, spec)
    open_store(session, keyspace, store_name).put_all([("a", 1), ("b", 2)])
    relayout_store(session, keyspace, store_name, 2 if spec.subpartitions != 2 else 3)
    admin.drop_store(session, keyspace, store_name, confirm=store_name)
    provision_store(session, spec)
    assert list(open_store(session, keyspace, store_name).all()) == []


def test_a_drop_after_a_reset_that_fenced_a_batch_in_flight_is_refused_unless_the_writer_is_stopped(
    session, keyspace, store_name
):
    """A reset clears the paused writer's unfinished batch (fencing its progress), but the
    writer's entries are plain writes: the drop, no longer refused for a pending batch, let them
    land in the store created again under the name (drop-after-reset-under-paused-writer, found
    by the simulator). The reset records the batch it fenced; the drop is refused while it is
    recorded, and a reset with writer_stopped clears it. The registry here is an earlier
    release's, without the column: the reset adds it before deleting anything."""
    spec = StoreSpec(keyspace, store_name, StoreType.PARTITIONED_KV, 2)
    old = provision_store(session, spec)
    paused = registry.take_epoch(session, old)
    registry.begin_batch(session, old, _position(0, 100), paused)  # then paused mid-batch
    session.execute(
        f"ALTER TABLE {keyspace}.{registry.REGISTRY_TABLE} DROP fenced_batch", execution_profile=DDL_PROFILE
    )
    admin.truncate_store(session, keyspace, store_name)
    progress = registry.progress(session, keyspace, store_name)
    assert progress.unfinished_batch is None and progress.fenced_batch == 0
    refused = r"its batch 0 was begun by a writer that never recorded it.*Nothing was dropped"
    with pytest.raises(WriterMayBeLiveError, match=refused):
        admin.drop_store(session, keyspace, store_name, confirm=store_name)
    admin.truncate_store(session, keyspace, store_name)  # a later reset keeps it
    assert registry.progress(session, keyspace, store_name).fenced_batch == 0
    admin.truncate_store(session, keyspace, store_name, writer_stopped=True)
    assert registry.progress(session, keyspace, store_name).fenced_batch is None
    admin.drop_store(session, keyspace, store_name, confirm=store_name)
    assert registry.find(session, keyspace, store_name) is None


def test_a_store_created_again_never_reuses_a_table_a_dropped_store_used(session, keyspace, store_name):
    """A task attempt of a recorded batch may outlive it (speculative, or cut off from its
    driver): no lease or pending batch shows it, so the drop is not refused, and its entry
    writes are plain writes. Into a store created again under the same table name they landed
    (drop-under-a-running-task-attempt, found by the simulator). The drop records its tables
    (book.dropped); the store created again starts past them, so such a write, prepared against
    the dropped table, fails and the new store holds nothing of it. Drops, creates and a
    re-layout keep moving on: no generation is used twice."""
    spec = StoreSpec(keyspace, store_name, StoreType.PARTITIONED_KV, 2)
    provision_store(session, spec)
    attempt = open_store(session, keyspace, store_name)
    attempt.put("a", 1)  # the attempt's statement is prepared against the store's first table
    admin.drop_store(session, keyspace, store_name, confirm=store_name)
    again = provision_store(session, spec)
    assert again.table == f"{store_name}_store_r1"
    with pytest.raises(InvalidRequest, match="does not exist"):
        attempt.put("a", 5)
    assert list(open_store(session, keyspace, store_name).all()) == []

    admin.drop_store(session, keyspace, store_name, confirm=store_name)
    assert admin.create_store(session, keyspace, store_name, partitions=2).table == f"{store_name}_store_r2"
    relayout_store(session, keyspace, store_name, 3)
    assert registry.lookup(session, keyspace, store_name).table == f"{store_name}_store_r3"
    admin.drop_store(session, keyspace, store_name, confirm=store_name)
    assert provision_store(session, spec).table == f"{store_name}_store_r4"


def test_a_run_that_takes_over_a_begun_batch_fences_it_so_the_drop_is_refused(
    session, keyspace, store_name, cassandra_config
):
    """A stream that starts with a batch an earlier writer began and never recorded replays and
    records it; that writer may still be paused mid-batch, its dead letters not yet written, and
    would write them into a store created again under the name (found by the simulator, seed
    1352888362 of aggregate-cache). The start records the batch as fenced: the drop is refused
    until writer_stopped, and a paused writer cannot record it (its epoch is gone)."""
    spec = StoreSpec(keyspace, store_name, StoreType.PARTITIONED_KV, 2)
    old = provision_store(session, spec)
    paused = registry.take_epoch(session, old)
    registry.begin_batch(session, old, _position(0, 100), paused)  # then paused, its letters unwritten
    taker = registry.take_epoch(session, old)
    stream_job._fence_taken_over_batch(session, SimpleNamespace(cassandra=cassandra_config), old, taker)
    with pytest.raises(StoreFencedError):
        registry.record_fenced_batch(session, old, 5, paused)
    registry.begin_batch(session, old, _position(0, 100), taker)  # the replay, recorded
    registry.record_batch(session, old, _position(0, 100), None, taker)
    progress = registry.progress(session, keyspace, store_name)
    assert (progress.unfinished_batch, progress.fenced_batch) == (None, 0)
    with pytest.raises(WriterMayBeLiveError, match="its batch 0 was begun by a writer that never recorded it"):
        admin.drop_store(session, keyspace, store_name, confirm=store_name)
    admin.drop_store(session, keyspace, store_name, confirm=store_name, writer_stopped=True)
    assert registry.find(session, keyspace, store_name) is None
