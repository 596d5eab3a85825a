"""Pinned sequences of the simulator's Kafka events and start-up pause (kafka_events.py): a
transaction open while batches are planned, then committed or aborted; the topic deleted and
created again, the refusal and its way out; a driver paused during its start-up while another
run takes the store. Each is replayed event by event with the invariant checked after each,
and each check is shown to catch its rule broken (the break made here, in memory)."""

from __future__ import annotations

import pytest

from statestore.conn import kafka as kafka_conn
from statestore.core.codecs import decode_long
from statestore.stream import checkpoint
from tests.simulation.machine import BatchProtocolMachine, InvariantBroken


def _machine() -> BatchProtocolMachine:
    machine = BatchProtocolMachine()
    machine.store_equals_truth()
    return machine


def _produce(machine: BatchProtocolMachine, *words: str, partition: int = 0) -> None:
    machine.produce(partition=partition, words=list(words), null=False, ahead_ms=0, after_ms=0)
    machine.store_equals_truth()


def _trigger(machine: BatchProtocolMachine) -> None:
    machine.trigger(crash_at=None, backup_at=None, order=0)
    machine.store_equals_truth()


def _start(machine: BatchProtocolMachine) -> None:
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.store_equals_truth()


def _counts(machine: BatchProtocolMachine) -> dict[str, int]:
    return {key.decode(): decode_long(row.entry.value) for key, row in machine.world.cassandra.rows.items()}


def _transaction_then_plain_record(machine: BatchProtocolMachine) -> None:
    """`a` in an open transaction at offset 0, then `b` outside it at offset 1."""
    machine.transaction_begins()
    _produce(machine, "a")
    machine.plain_producer()
    _produce(machine, "b")


@pytest.mark.parametrize("commit", [True, False])
def test_an_open_transaction_holds_back_the_batches_and_only_its_commit_counts(commit):
    """While the transaction is open the partition's last stable offset is 0: no batch is
    planned, not even over `b`. Once it ends (its control record at offset 2), the batch reads
    `b`, and `a` only if it committed."""
    machine = _machine()
    _transaction_then_plain_record(machine)
    _start(machine)
    _trigger(machine)
    assert machine.job.folder.offsets == {}
    machine.transaction_ends(which=0, commit=commit)
    _trigger(machine)
    assert machine.job.folder.offsets == {0: {0: 3}}
    assert _counts(machine) == ({"a": 1, "b": 1} if commit else {"b": 1})


def test_a_reader_at_read_uncommitted_counts_an_open_transaction_and_the_simulator_says_so(monkeypatch):
    """The job's isolation level broken (read_uncommitted): its batch counts `a`, still in an
    open transaction, and the truth (committed records only) disagrees."""
    real = kafka_conn.spark_source_options
    monkeypatch.setattr(
        kafka_conn, "spark_source_options", lambda config: {**real(config), "kafka.isolation.level": "read_uncommitted"}
    )
    machine = _machine()
    _transaction_then_plain_record(machine)
    _start(machine)
    with pytest.raises(InvariantBroken, match="key 'a': stored 1"):
        _trigger(machine)


def _store_of_the_deleted_topic(machine: BatchProtocolMachine) -> None:
    _start(machine)
    _produce(machine, "a", "b")
    _trigger(machine)
    machine.topic_created_again(partitions=1)
    machine.store_equals_truth()
    assert machine.job is None
    _produce(machine, "c")


def test_a_topic_created_again_is_refused_and_its_way_out_counts_the_new_topic():
    """The store counted the first topic; the topic is deleted and created again (its running
    query fails); the next start is refused by checkpoint.topic_problem, naming the way out
    (checkpoint.NEW_TOPIC); the machine takes it (a reset, a new checkpoint) and the store then
    holds the new topic's counts only."""
    machine = _machine()
    _store_of_the_deleted_topic(machine)
    _start(machine)
    assert machine.refusal is not None and "was deleted and created again" in machine.refusal
    assert checkpoint.NEW_TOPIC.format(store="words") in machine.refusal
    assert _counts(machine) == {"a": 1, "b": 1}
    machine.way_out_reset(crash_at=None, order=0)
    machine.store_equals_truth()
    _trigger(machine)
    assert _counts(machine) == {"c": 1}
    assert machine.world.cassandra.progress().topic_id == machine.world.topic.topic_id


def test_a_topic_check_that_accepts_the_new_topic_is_caught(monkeypatch):
    """checkpoint.topic_problem broken (it accepts any id): the start records the new topic's id
    over counts of the deleted one, and the store no longer equals the truth of its input."""
    monkeypatch.setattr(checkpoint, "topic_problem", lambda progress, topic, topic_id: None)
    machine = _machine()
    _store_of_the_deleted_topic(machine)
    with pytest.raises(InvariantBroken):
        _start(machine)
        _trigger(machine)


def test_a_driver_paused_in_its_start_up_stops_at_its_first_batch_after_another_run_took_the_store():
    """Paused right after taking the lease and epoch 1, before its checks; its lease lapses; a
    run of the same checkpoint takes the lease and epoch 2 and counts a batch. The paused driver
    goes on: its start's checks pass (the checkpoint is its own), its query starts and plans the
    next batch, whose lease check stops it (LeaseLostError, exit 2) before it writes anything."""
    machine = _machine()
    _produce(machine, "a")
    machine.start_and_pause(later=0, order=0, recover=False)
    assert machine.zombie is not None and machine.zombie[0].epoch == 1
    _start(machine)
    _trigger(machine)
    _produce(machine, "b")
    machine.zombie_resumes(crash_at=None)
    machine.store_equals_truth()
    assert any("stopped (exit 2)" in step and "was taken by" in step for step in machine.steps)
    assert _counts(machine) == {"a": 1}
    _trigger(machine)
    assert _counts(machine) == {"a": 1, "b": 1}
