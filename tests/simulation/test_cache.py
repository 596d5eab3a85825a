"""The batch protocol's simulator with the apply cache (tests/simulation/cache.py): the shortest
sequences of the bugs it found, and its bounded CI run."""

from __future__ import annotations

import random

from hypothesis import settings

from tests.simulation.cache import (
    ALTER_STORE,
    CQL,
    CacheProtocolMachine,
)
from tests.simulation.runner import run_seed

# About 5 CPU-seconds (measured: --durations on the 2-core machine, other runs beside it).
EXAMPLES = 150


def test_a_table_ttl_set_during_a_batch_and_removed_before_the_next_leaves_no_file_trusted():
    """The shortest sequence the simulator found (seed 13 of CacheProtocolMachine, 200
    examples; KNOWN ttl-during-batch until fixed): batch 0 writes 'a' while an operator has set
    a table TTL of 30 s by CQL alone (after the batch's plan read none), removed before batch
    1's plan. No plan ever saw the TTL, so none recorded ttl_expiring_until, and batch 1 trusted
    the file: it vouched for 'a' = 1 though the row expired 100 s earlier (CacheVouchedWrong),
    and would have written 2. The schema versions batch 1's plan reads differ from batch 0's,
    so it trusts no file, reads 'a', and the store counts it from nothing."""
    machine = CacheProtocolMachine()
    machine.start_job(max_future_ms=1_000, max_offsets=None, crash_at=None, order=0)
    machine.produce(partition=0, words=["a"], null=False, ahead_ms=0, after_ms=0)
    machine.trigger(crash_at=None, backup_at=None, order=0, seed=0, deaths=[], ttl_during=CQL)
    machine.produce(partition=0, words=["a"], null=False, ahead_ms=0, after_ms=100_000)
    machine.trigger(crash_at=None, backup_at=None, order=0, seed=0, deaths=[], ttl_during=None)
    machine.store_equals_truth()


def test_a_table_ttl_set_during_a_batch_by_alter_store_leaves_no_file_trusted():
    """The same sequence with the TTL set by admin.alter_store (the hook's, the admin DAG's `alter`), which
    records the registry's expiry mark before its ALTER: batch 1 trusts no file, and the store
    counts 'a' from nothing (its row expired)."""
    machine = CacheProtocolMachine()
    machine.start_job(max_future_ms=1_000, max_offsets=None, crash_at=None, order=0)
    machine.produce(partition=0, words=["a"], null=False, ahead_ms=0, after_ms=0)
    machine.trigger(crash_at=None, backup_at=None, order=0, seed=0, deaths=[], ttl_during=ALTER_STORE)
    machine.produce(partition=0, words=["a"], null=False, ahead_ms=0, after_ms=100_000)
    machine.trigger(crash_at=None, backup_at=None, order=0, seed=0, deaths=[], ttl_during=None)
    machine.store_equals_truth()


def test_the_apply_cache_vouches_only_for_what_the_store_holds():
    """Random sequences of the key-value run's events with the apply cache on or off per run
    (buckets, local mode or a cluster, the driver's own apply), task attempts dying after any
    landing and run again on another executor, the expire job's deletes (its outside_writes
    marks, or a mark left by its death) and table TTLs set and removed between batches or during
    one (by CQL alone or by admin.alter_store): what a bucket file vouches for is what the store
    holds, and the store equals the truth of its input. Seeded as test_simulation.py is; a
    failure's notes carry the command that runs it again (before, only the seed, which
    `python -m tests.simulation --seed S` ran with other settings and every kind)."""
    seed = 0 if settings.default.derandomize else random.SystemRandom().randrange(2**32)
    run_seed(
        seed,
        frozenset(),
        EXAMPLES,
        store="cache",
    )
