"""Pinned sequences of the operator's relayout, drop-store and entries' consistency level
(tests/simulation/operator_events.py), each a shortest sequence the state machine found or a
hand-picked one, replayed event by event with the invariant checked after each."""

from __future__ import annotations

import pytest

from statestore.store import admin, relayout
from statestore.store.book import dropped
from tests.simulation.fake_cassandra import LWT_APPLIED, LWT_LATE, FakeCassandra
from tests.simulation.machine import BatchProtocolMachine, CountsWrong, InvariantBroken
from tests.simulation.operator_events import StoreTableDropped


def _machine_with_a_batch() -> BatchProtocolMachine:
    machine = BatchProtocolMachine()
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.produce(partition=0, words=["a"], null=False, ahead_ms=0, after_ms=0)
    machine.trigger(crash_at=None, backup_at=None, order=0)
    machine.trigger_and_pause(pause_at=9, order=0)  # between batches: the job is stopped
    machine.zombie_resumes(crash_at=None)
    machine.store_equals_truth()
    return machine


def test_a_store_created_again_after_a_relayout_and_a_drop_starts_empty(monkeypatch):
    """Seed 2925520031's sequence (before admin.tables_to_drop): the relayout kept the store's
    first table, the drop dropped only the relaid one, and the store created again found the
    first table, with key 'a' of batch 0, under its name. Either fix alone keeps it out: the
    drop drops every table of the store, and the store created again starts past every table
    the dropped one used (book.dropped)."""
    machine = _machine_with_a_batch()
    machine.operator_relays_out(swap=None, pause=False, killed=False)
    machine.operator_drops_and_creates_store(writer_stopped=False, first_epoch=1)
    machine.store_equals_truth()
    assert machine.world.cassandra.rows == {} and machine.world.cassandra.kept == {}
    monkeypatch.setattr(dropped, "table_after", lambda table, used: table)  # before book.dropped
    machine = _machine_with_a_batch()
    machine.operator_relays_out(swap=None, pause=False, killed=False)
    machine.operator_drops_and_creates_store(writer_stopped=False, first_epoch=1)
    machine.store_equals_truth()
    monkeypatch.setattr(admin, "tables_to_drop", lambda name, table, existing: [table])  # and before a428ff8
    machine = _machine_with_a_batch()
    machine.operator_relays_out(swap=None, pause=False, killed=False)
    with pytest.raises(CountsWrong):
        machine.operator_drops_and_creates_store(writer_stopped=False, first_epoch=1)
        machine.store_equals_truth()


def test_a_relayout_whose_swap_timed_out_applied_keeps_the_table_it_installed(monkeypatch):
    """The swap times out applied, or accepted and committed by the clean-up's serial read:
    the relayout is done. A clean-up that drops the new table on any failure (issue 45 item 2)
    drops the table the store uses."""
    for outcome in (LWT_APPLIED, LWT_LATE):
        machine = _machine_with_a_batch()
        machine.operator_relays_out(swap=outcome, pause=False, killed=False)
        machine.store_equals_truth()
        assert machine.world.cassandra.table_generation == 1
    monkeypatch.setattr(relayout, "settle_failed_relayout", lambda table, epoch, sent, registered: relayout.DROP)
    machine = _machine_with_a_batch()
    with pytest.raises(StoreTableDropped):
        machine.operator_relays_out(swap=LWT_APPLIED, pause=False, killed=False)


def test_a_relayout_paused_past_its_lease_is_refused_once_a_stream_took_the_store():
    """Paused after its copy (its lease lapsed), a stream takes the store and counts a batch
    into the old table; the relayout wakes: its swap is refused by the epoch, its new table
    kept (another writer took the store: settle_failed_relayout), the store keeps its table and
    counts."""
    machine = _machine_with_a_batch()
    machine.operator_relays_out(swap=None, pause=True, killed=False)
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.produce(partition=0, words=["a"], null=False, ahead_ms=0, after_ms=0)
    machine.trigger(crash_at=None, backup_at=None, order=0)
    machine.trigger_and_pause(pause_at=9, order=0)
    machine.zombie_resumes(crash_at=None)
    machine.paused_relayout_resumes(swap=None, killed=False)
    machine.store_equals_truth()
    assert machine.world.cassandra.table_generation == 0
    assert any("settled: keep" in step for step in machine.steps)  # named in the error, not dropped


def test_a_writer_in_a_lagging_data_center_at_a_local_level_counts_from_old_entries(monkeypatch):
    """LOCAL_QUORUM on a keyspace in two data centers is refused (level_for); were it taken, a
    writer restarted in the data center that fell behind would read 'a' before batch 0 and
    count on from there (issue 45 item 6)."""
    machine = _machine_with_a_batch()
    machine.operator_sets_dml_consistency(setting="LOCAL_QUORUM", data_centers=2)
    assert "refused" in machine.steps[0] and not machine.world.cassandra.weak_reads
    machine.operator_sets_dml_consistency(setting="auto", data_centers=2)
    machine.other_dc_falls_behind()
    machine.writer_restarts_in_other_dc()
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.produce(partition=0, words=["a"], null=False, ahead_ms=0, after_ms=0)
    machine.trigger(crash_at=None, backup_at=None, order=0)
    machine.store_equals_truth()

    from statestore.conn import cassandra as levels

    monkeypatch.setattr(
        levels, "level_for", lambda kind, setting, keyspace, dcs: levels.configured_level(kind, setting)
    )
    machine = BatchProtocolMachine()
    machine.operator_sets_dml_consistency(setting="LOCAL_QUORUM", data_centers=2)
    machine.other_dc_falls_behind()
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.produce(partition=0, words=["a"], null=False, ahead_ms=0, after_ms=0)
    machine.trigger(crash_at=None, backup_at=None, order=0)
    machine.trigger_and_pause(pause_at=9, order=0)
    machine.zombie_resumes(crash_at=None)
    machine.writer_restarts_in_other_dc()
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.produce(partition=0, words=["a"], null=False, ahead_ms=0, after_ms=0)
    with pytest.raises(CountsWrong):
        machine.trigger(crash_at=None, backup_at=None, order=0)


def test_a_stream_after_a_relayout_killed_with_its_swap_in_flight_writes_the_table_the_swap_installed():
    """Seed 2448575435's bug (relayout-killed-swap-in-flight): the relayout's swap was accepted,
    not committed, when its process died; the next stream read the old table before its
    take_epoch's Paxos round committed the swap, and counted into the old table. It now resolves
    the store again once the epoch is its own (job.start_query)."""
    machine = _machine_with_a_batch()
    machine.operator_relays_out(swap=LWT_LATE, pause=False, killed=True)
    machine.world.clock_ms += 60_000  # the killed relayout's lease lapses
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.produce(partition=0, words=["a", "b"], null=False, ahead_ms=0, after_ms=0)
    machine.trigger(crash_at=None, backup_at=None, order=0)
    machine.store_equals_truth()
    assert machine.world.cassandra.table_generation == 1


def _paused_mid_batch_then_reset(null: bool) -> BatchProtocolMachine:
    """A driver paused mid-batch (its batch begun, its entries or dead letter not yet written),
    then `statestore reset`, which fences it and clears its unfinished batch."""
    machine = BatchProtocolMachine()
    machine.start_job(crash_at=None, max_future_ms=1000, max_offsets=None, order=0)
    machine.produce(partition=0, words=["a"], null=null, ahead_ms=0, after_ms=0)
    machine.trigger_and_pause(pause_at=1, order=0)
    machine.operator_acts(drop=False)
    machine.store_equals_truth()
    assert machine.zombie is not None and machine.world.cassandra.serial_progress().unfinished_batch is None
    return machine


@pytest.mark.parametrize("null", [True, False], ids=["dead-letter", "entries"])
def test_a_drop_after_a_reset_that_fenced_a_paused_writer_is_refused_until_it_is_stopped(null):
    """Seed 2359299874's sequence (drop-after-reset-under-paused-writer): the reset cleared the
    paused driver's batch, the drop was no longer refused, and the driver's late dead letter (or
    entries, plain writes) landed in the store created again under the name. The reset now
    records the batch it fenced, and the drop is refused while it is recorded, unless
    --writer-stopped (the operator has made sure the paused driver is gone)."""
    machine = _paused_mid_batch_then_reset(null)
    machine.operator_drops_and_creates_store(writer_stopped=False, first_epoch=1)
    assert any("refused (WriterMayBeLiveError)" in step and "batch 0" in step for step in machine.steps)
    machine.store_equals_truth()
    machine.zombie_resumes(crash_at=None)  # fenced: it writes only into the reset store, shadowed
    machine.store_equals_truth()
    machine = _paused_mid_batch_then_reset(null)
    machine.operator_drops_and_creates_store(writer_stopped=True, first_epoch=1)
    assert machine.zombie is None and "store dropped and created again" in machine.steps[-1]
    machine.store_equals_truth()


def _taken_over_then_dropped() -> BatchProtocolMachine:
    """Seed 1352888362's failure (of `--store aggregate-cache`), on the key-value kind: a driver
    paused just after beginning batch 0 (a record without a value: a dead letter to write), the
    next run on its checkpoint replays and records batch 0, the operator drops the store and
    creates it again, then the paused driver goes on."""
    machine = BatchProtocolMachine()
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.produce(partition=0, words=[], null=True, ahead_ms=0, after_ms=0)
    machine.trigger_and_pause(pause_at=1, order=0)  # batch 0 begun, its dead letter not yet written
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.trigger(crash_at=20, backup_at=None, order=0)  # batch 0 replayed and recorded, then a crash
    machine.produce(partition=0, words=["a"], null=False, ahead_ms=0, after_ms=100_000)  # the lease lapses
    machine.operator_drops_and_creates_store(writer_stopped=False, first_epoch=1)
    machine.store_equals_truth()
    machine.zombie_resumes(crash_at=None)
    machine.store_equals_truth()
    return machine


def test_a_drop_after_a_run_took_over_a_paused_writers_batch_is_refused(monkeypatch):
    """The run that replays batch 0 records it as the store's fenced batch (the paused writer
    that began it may wake), so the drop is refused (writer_stopped not said) and the paused
    driver's late dead letter lands in the store that counted its batch, where it belongs.
    Without that record the drop went ahead and the letter landed in the store created again."""
    machine = _taken_over_then_dropped()
    assert machine.world.cassandra.progress().fenced_batch == 0
    assert "words_store" not in machine.world.cassandra.dropped_tables  # refused: nothing dropped
    monkeypatch.setattr(FakeCassandra, "record_fenced_batch", lambda self, batch_id, epoch: None)
    with pytest.raises(InvariantBroken):
        _taken_over_then_dropped()
