"""The window aggregate store in the simulator (tests/simulation/window_aggregates.py): a pinned
sequence, and a bounded run of the state machine in CI."""

from __future__ import annotations

import random

from hypothesis import settings

from statestore.store.book import deadletters
from tests.simulation.aggregates import SPEC
from tests.simulation.runner import run_seed
from tests.simulation.test_simulation import KNOWN_BUGS_EXCLUDED
from tests.simulation.window_aggregates import WindowAggregateProtocolMachine

# About 3 CPU-seconds, as test_aggregates.py's run.
EXAMPLES = 200
GOOD = dict(amount=2.5, fault=None, key="a", null=False, partition=0, pos=1, qty=1, user="u1")


def test_a_late_record_counts_in_its_open_windows_only_and_is_a_dead_letter():
    """Hopping windows of 1 minute every 20 s (WINDOWINGS[2], grace 30 s): a record at T, then
    one at T - 60 s in the next batch, whose window starting at T - 100 s had closed (its end +
    grace before the stream time T): it counts in its two open windows only and is a dead letter
    `late`; a task attempt dies after one landing and its successor completes the batch."""
    machine = WindowAggregateProtocolMachine()
    machine.choose_windowing(which=2)
    machine.produce(after_ms=100_000, ahead_ms=0, **GOOD)
    now = machine.world.clock_ms
    machine.start_job(crash_at=None, max_future_ms=60_000, max_offsets=None, order=0)
    machine.trigger(backup_at=None, crash_at=None, deaths=[], order=0, speculative=None)
    machine.produce(after_ms=0, ahead_ms=-60_000, **{**GOOD, "amount": 7})
    machine.trigger(backup_at=None, crash_at=None, deaths=[1], order=0, speculative=None)
    machine.store_equals_truth()
    rows = machine.windows.table.rows
    highs = {start - now: SPEC.finish(SPEC.unpack(row.entry.value))["hi"] for (_, start), row in rows.items()}
    assert highs == {-80_000: 7.0, -60_000: 7.0, -40_000: 2.5, -20_000: 2.5, 0: 2.5}
    late = [letter for letter in machine.world.cassandra.dead_letters if letter.reason == deadletters.LATE]
    assert [letter.offset for letter in late] == [1]


def test_the_window_aggregate_store_equals_the_truth_through_crashes_restores_and_task_attempts():
    """Random sequences of the window run's events (records on the scale of the windows, some
    behind the clock; tumbling or hopping windows with or without grace; crashes, replays,
    restores, settings changed between runs; task attempts dying after any landing and
    speculative ones landing after their successor) with the aggregate run's JSON records (some
    bad) aggregated per key and window through apply_window_aggregates, the invariant (each
    window's measures the brute force of its counted records; bad and late records exactly the
    dead letters) checked after every step. Seeded as test_simulation.py is."""
    seed = 0 if settings.default.derandomize else random.SystemRandom().randrange(2**32)
    run_seed(seed, KNOWN_BUGS_EXCLUDED, EXAMPLES, store="window-aggregates")
