"""The session aggregate store in the simulator (tests/simulation/session_aggregates.py): pinned
sequences, and a bounded run of the state machine in CI."""

from __future__ import annotations

import random

from hypothesis import settings

from statestore.store.book import deadletters
from tests.simulation.aggregates import SPEC
from tests.simulation.runner import run_seed
from tests.simulation.session_aggregates import SessionAggregateProtocolMachine
from tests.simulation.test_simulation import KNOWN_BUGS_EXCLUDED

# About 6 CPU-seconds, as test_sessions.py's run.
EXAMPLES = 300
GOOD = dict(fault=None, key="a", null=False, partition=0, qty=1, user="u1")


def _measures(machine: SessionAggregateProtocolMachine, key: bytes) -> list[tuple[int, int, dict]]:
    """The key's sessions as the store will hold them: (start, end, measures) from the first
    record's time."""
    now = machine.t0
    return [
        (s.start_ms - now, s.end_ms - now, SPEC.finish(SPEC.unpack(s.value)))
        for s in machine.sessions.table.settled()[key]
    ]


def test_a_record_between_two_stored_sessions_merges_their_measures_through_a_dead_attempt():
    """Key 'a' holds two sessions, at T and T + 120 s (the gap is a minute); the next batch's
    record at T + 60 s bridges them, and its record at T + 30 s is more than the grace (a
    minute) older than the stream time T + 120 s: a dead letter `late`, counted nowhere. The
    merge spans two segments (the merged session written first, the two it replaces deleted
    after); the batch's first task attempt dies after one landing, the merged session, and the
    next finds it, leaves it and deletes the two: one session whose measures are those of the
    three records."""
    machine = SessionAggregateProtocolMachine()
    machine.t0 = machine.world.clock_ms
    machine.produce(after_ms=0, ahead_ms=0, amount=2.5, pos=1, **GOOD)
    machine.produce(after_ms=0, ahead_ms=120_000, amount=7, pos="x", **GOOD)
    machine.start_job(crash_at=None, max_future_ms=300_000, max_offsets=None, order=0)
    machine.trigger(backup_at=None, crash_at=None, deaths=[], order=0, speculative=None)
    assert [(start, end) for start, end, _ in _measures(machine, b"a")] == [(0, 0), (120_000, 120_000)]
    machine.produce(after_ms=60_000, ahead_ms=0, amount=-2, pos=2.25, **GOOD)
    machine.produce(after_ms=0, ahead_ms=-30_000, amount=100, pos=True, **GOOD)
    machine.trigger(backup_at=None, crash_at=None, deaths=[1], order=0, speculative=None)
    assert "task attempt 1 died after 1 landing(s)" in machine.steps[2]
    machine.store_equals_truth()
    ((start, end, measures),) = _measures(machine, b"a")
    assert (start, end) == (0, 120_000)
    assert measures == {"n": 3, "total": 3, "s": 7.5, "hi": 7.0, "lo": -2.0, "last": "x", "u": 1.0}
    late = [letter for letter in machine.world.cassandra.dead_letters if letter.reason == deadletters.LATE]
    assert [letter.offset for letter in late] == [3]


def test_an_attempt_after_a_speculative_one_that_wrote_the_key_skips_it():
    """The shortest sequence the kind finds with a plan that takes its own batch's sessions as
    any stored one: a speculative attempt of batch 0 reads, plans and lands key 'a''s session,
    then the task's attempt reads that session of its own batch and must leave it as it is
    (merged again, it holds two records for one)."""
    machine = SessionAggregateProtocolMachine()
    machine.t0 = machine.world.clock_ms
    machine.start_job(crash_at=None, max_future_ms=1_000, max_offsets=None, order=0)
    machine.produce(after_ms=0, ahead_ms=0, amount=2.5, pos=1, **GOOD)
    machine.trigger(backup_at=None, crash_at=None, deaths=[], order=0, speculative=(False, 1))
    machine.store_equals_truth()
    assert _measures(machine, b"a") == [
        (0, 0, {"n": 1, "total": 1, "s": 2.5, "hi": 2.5, "lo": 2.5, "last": 1, "u": 1.0})
    ]


def test_the_session_aggregate_store_equals_the_truth_through_task_attempts_and_the_batch_log():
    """Random sequences of the session run's events (records on the scale of the gap, some
    behind the clock; task attempts dying after any landing, speculative ones going on after
    their successor, the batch log landing what a dead attempt's LOGGED batch left; crashes,
    replays, restores) with the aggregate run's JSON records (some bad) folded into each key's
    sessions through apply_session_deltas with MeasureValues, the invariant (each session's
    measures the brute force of its counted records; bad and late records exactly the dead
    letters) checked after every step. Seeded as test_simulation.py is."""
    seed = 0 if settings.default.derandomize else random.SystemRandom().randrange(2**32)
    run_seed(seed, KNOWN_BUGS_EXCLUDED, EXAMPLES, store="session-aggregates")
