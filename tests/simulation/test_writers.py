"""Pinned sequences of the simulator's writers beyond one (issue 45): a driver paused past its
lease while another run takes the store, registry transactions whose outcome is unknown, and the
operator's reset between runs. Each is a shortest sequence the state machine found or a
hand-picked one, replayed event by event with the invariant checked after each."""

from __future__ import annotations

import pytest

from statestore.core.codecs import decode_long
from statestore.store.book.lease import LeaseLostError
from tests.simulation.fake_cassandra import LWT_APPLIED, LWT_LATE, LWT_LOST
from tests.simulation.machine import BatchProtocolMachine


def _machine() -> BatchProtocolMachine:
    machine = BatchProtocolMachine()
    machine.store_equals_truth()
    return machine


def _produce(machine: BatchProtocolMachine, *, null: bool = False, words: tuple[str, ...] = ("a",)) -> None:
    machine.produce(partition=0, words=list(words), null=null, ahead_ms=0, after_ms=0)
    machine.store_equals_truth()


def test_a_paused_driver_resumes_after_another_run_took_the_store_and_changes_nothing():
    """Paused after its first key's write (its lease lapsed), another run of the same checkpoint
    takes the lease and the next epoch, runs the batch again with its write timestamp, then a
    later batch; the paused driver goes on: its last write loses to the later batch's, its
    record_batch is refused (StoreFencedError, exit 2)."""
    machine = _machine()
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    _produce(machine, words=("a", "b"))
    machine.trigger_and_pause(pause_at=2, order=0)  # offsets/0, begin, key 'a' written
    assert machine.zombie is not None
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.trigger(crash_at=None, backup_at=None, order=0)
    _produce(machine, words=("b",))
    machine.trigger(crash_at=None, backup_at=None, order=0)
    machine.zombie_resumes(crash_at=None)
    machine.store_equals_truth()
    assert any("fenced off" in step for step in machine.steps)
    assert decode_long(machine.world.cassandra.rows[b"b"].entry.value) == 2


def test_a_paused_driver_that_finished_its_batch_stops_at_the_next_lease_check():
    machine = _machine()
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    _produce(machine)
    machine.trigger_and_pause(pause_at=4, order=0)  # past its last step: between batches
    job, _ = machine.zombie
    with pytest.raises(LeaseLostError):
        job.check_lease()


@pytest.mark.parametrize("outcome", [LWT_APPLIED, LWT_LOST, LWT_LATE])
def test_registry_transactions_of_unknown_outcome_are_retried_and_the_counts_stay_exact(outcome):
    """Every registry transaction of a start and a batch times out once with `outcome`; the
    driver retries each as with_retries does (one WriteTimeout of type CAS, is_transient)."""
    machine = _machine()
    machine.registry_times_out(outcomes=[outcome] * 2)
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    _produce(machine, words=("a", "b"))
    machine.registry_times_out(outcomes=[outcome, outcome])
    machine.trigger(crash_at=None, backup_at=None, order=0)
    assert sum("retrying" in step for step in machine.steps) == 2
    assert machine.world.cassandra.progress().last_batch_id == 0


def test_three_timeouts_in_a_row_stop_the_run_and_a_restart_finishes_the_batch():
    machine = _machine()
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    _produce(machine)
    machine.registry_times_out(outcomes=[LWT_APPLIED, LWT_LATE, LWT_LOST])
    machine.trigger(crash_at=None, backup_at=None, order=0)
    assert machine.job is None and machine.refusal is None
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.trigger(crash_at=None, backup_at=None, order=0)
    assert machine.world.cassandra.progress().last_batch_id == 0


def test_a_dropped_table_is_refused_until_the_reset_then_a_new_checkpoint_counts_again():
    machine = _machine()
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    _produce(machine)
    machine.trigger(crash_at=None, backup_at=None, order=0)
    machine.job = None  # stopped
    machine.world.cassandra.lease = None
    machine.operator_acts(drop=True)
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    assert machine.refusal is not None and "table is gone" in machine.refusal
    machine.way_out_reset(crash_at=None, order=0)
    machine.trigger(crash_at=None, backup_at=None, order=0)
    machine.store_equals_truth()
    assert decode_long(machine.world.cassandra.rows[b"a"].entry.value) == 1


def test_a_paused_drivers_dead_letters_do_not_land_in_a_reset_store():
    """Found by the simulator (seed 13, 300 examples; shrunk): a driver paused after beginning a
    batch with a record without a value, `statestore reset`, then the paused driver goes on: its
    dead letters, written without a timestamp, landed in the emptied store (DeadLetterUnexpected).
    Now they carry their batch's write timestamp and the reset deletes each partition the store
    read at its floor (deadletters.delete_partitions_before)."""
    machine = _machine()
    machine.start_job(crash_at=None, max_future_ms=1000, max_offsets=None, order=0)
    _produce(machine, words=())
    _produce(machine, null=True, words=())
    machine.trigger_and_pause(order=0, pause_at=1)
    machine.operator_acts(drop=False)
    machine.zombie_resumes(crash_at=None)
    machine.store_equals_truth()
    assert not machine.world.cassandra.dead_letters


def test_a_checkpoint_of_before_a_reset_that_committed_nothing_is_refused():
    """Found by the simulator (seed 5, 1,000 examples; this is its sequence, shortened by hand):
    a --recover-from-store run crashes after planning its batch 0, the store is reset, and the
    job restarts on that checkpoint: its batch 0 started at the old store's position
    (CountsWrong). Now checkpoint_problem refuses it: a reset store keeps its floor as last_ts."""
    machine = _machine()
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    _produce(machine)
    machine.trigger(crash_at=8, backup_at=None, order=0)  # batch 0 recorded and committed, then a crash
    machine.new_checkpoint(recover=True, crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    _produce(machine)
    machine.trigger(crash_at=0, backup_at=None, order=0)  # offsets/0 planned, then a crash
    machine.operator_acts(drop=False)
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    assert machine.refusal is not None and "planned or read batches" in machine.refusal
    machine.way_out_recover(crash_at=None, order=0)  # the way out it names: a new, empty checkpoint
    machine.trigger(crash_at=None, backup_at=None, order=0)
    machine.store_equals_truth()
