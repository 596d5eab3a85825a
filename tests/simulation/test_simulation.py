"""The batch protocol's simulator (tests/simulation, issue 45) in CI: a bounded run of the
state machine, with the events of the known, not yet fixed bugs left out (KNOWN_BUGS_EXCLUDED).
`python -m tests.simulation --seconds N` runs it for longer, every event included."""

from __future__ import annotations

import random

from hypothesis import settings

from tests.simulation.runner import run_seed

# The known bugs whose events this run leaves out (machine.KNOWN_BUGS says what each leaves
# out). Remove a bug's name here once it is fixed: the run then takes its events again.
KNOWN_BUGS_EXCLUDED: frozenset[str] = frozenset()
# The run's budget: about 15 CPU-seconds (measured on the 2-core CI machine: 2000 examples of
# 40 events took 25 CPU-s, 49 s while another test run kept it busy), under half the minute a
# CI lane may give it even when busy.
EXAMPLES = 1200


def test_the_store_equals_the_truth_of_its_input_through_crashes_restarts_and_restores():
    """Random sequences of records (some without a value, some far ahead in time), partitions
    added, micro-batches, driver crashes after any step of a batch, restarts with other
    --max-future and --max-offsets-per-trigger, checkpoint backups (even mid-batch) restored,
    checkpoints lost and --recover-from-store, with the invariant (tests.simulation.truth)
    checked after every step. Issue 45 item 1 (a copy restored between offsets/N and commits/N
    while batch N+1 was half written) is in: fixed by position.recorded_done; and item 5 (a
    --max-future other than the one the store's unfinished batch was first written under, when
    that batch runs again): fixed by the rules begin_batch records (position.batch_rules).

    And the recovery once partitions were added before the store's offsets named them (found by
    the simulator: Spark's Kafka source refused offsets that did not name every partition, exit
    1): fixed by position.naming_partitions.

    Also a driver paused past its lease that goes on after another run took the store,
    registry transactions of unknown outcome, `statestore reset` and a table dropped by hand
    between runs. The two bugs found there (a paused driver's dead letters in a reset store; a
    checkpoint of before a reset that planned and committed nothing) are fixed; their sequences
    are tests in test_writers.py. And a reset paused between its epoch check and its TRUNCATE
    past any lease TTL, woken later or killed: with a reset lease that lapsed (before
    admin.RESET_LEASE_DURABLE) seed 1 found a stream's recorded batch emptied by the woken reset.

    Under the "ci" Hypothesis profile (derandomize) the seed is fixed, so CI runs the same
    examples every time; otherwise each run draws a new seed, printed with a failure."""
    seed = 0 if settings.default.derandomize else random.SystemRandom().randrange(2**32)
    run_seed(seed, KNOWN_BUGS_EXCLUDED, EXAMPLES)
