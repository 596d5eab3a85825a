"""The batch protocol's simulator over an aggregate store with the apply cache
(tests/simulation/aggregate_cache.py, issues 45 and 47): a cached batch after a restart, and
its bounded CI run."""

from __future__ import annotations

import random

from hypothesis import settings

from tests.simulation import aggregate_cache
from tests.simulation.aggregate_cache import AggregateCacheProtocolMachine
from tests.simulation.aggregates import SPEC
from tests.simulation.runner import run_seed
from tests.simulation.test_simulation import KNOWN_BUGS_EXCLUDED

# About 3 CPU-seconds (as test_aggregates.py; measured with --durations on the 2-core machine).
EXAMPLES = 100
GOOD = dict(amount=2.5, fault=None, key="a", null=False, partition=0, pos=1, qty=1, user="u1")


def test_a_batch_replayed_after_a_restart_reads_its_key_and_the_next_batches_merge_from_the_file(monkeypatch):
    """Batch 0 writes 'a' (a store's first batch: its file complete); batch 1's write of 'a'
    lands and the driver dies before recording it. The restarted run trusts no file: its replay
    of batch 1 reads 'a', finds it tagged batch 1 and skips it, keeping the row as read; batches 2
    and 3 take 'a' from the file (no read) and merge their records into it. Each file vouches for
    what the store holds (the vouching check runs at every lookup), and the measures are those of
    every record once (with apply_aggregates remembering the entry read, not the one written,
    batch 1's file vouched for 'a' as absent: CacheVouchedWrong)."""
    applied = []
    real = aggregate_cache.apply_aggregates

    def spied(*args, **kwargs):
        stats = real(*args, **kwargs)
        applied.append((args[3], stats.read, stats.written))
        return stats

    monkeypatch.setattr(aggregate_cache, "apply_aggregates", spied)
    machine = AggregateCacheProtocolMachine()
    machine.produce(after_ms=0, ahead_ms=0, **GOOD)
    machine.start_job(crash_at=None, max_future_ms=1000, max_offsets=None, order=0)
    machine.trigger(crash_at=None, backup_at=None, order=0, seed=0, deaths=[], ttl_during=None)
    machine.produce(after_ms=1_000, ahead_ms=0, **{**GOOD, "qty": 2})
    machine.trigger(crash_at=2, backup_at=None, order=0, seed=0, deaths=[], ttl_during=None)
    assert machine.job is None and machine.world.cassandra.progress().unfinished_batch == 1
    machine.start_job(crash_at=None, max_future_ms=1000, max_offsets=None, order=0)
    machine.trigger(crash_at=None, backup_at=None, order=0, seed=0, deaths=[], ttl_during=None)  # the replay
    machine.store_equals_truth()
    for qty, user in ((4, "u2"), (8, "u3")):
        machine.steady_batch(keys=["a"], qty=qty, amount=2.5, user=user, seed=0)
        machine.store_equals_truth()
    # (batch, keys read, entries written) per cached apply: batch 1 twice, its replay skipping 'a'.
    assert applied == [(0, 0, 1), (1, 0, 1), (1, 1, 0), (2, 0, 1), (3, 0, 1)]
    row = machine.world.cassandra.rows[b"a"].entry
    assert row.batch_id == 3
    assert SPEC.finish(SPEC.unpack(row.value)) == {
        "n": 4, "total": 15, "s": 10.0, "hi": 2.5, "lo": 2.5, "last": 1, "u": 3.0
    }  # fmt: skip


def test_an_aggregate_store_files_vouch_only_for_what_the_store_holds():
    """Random sequences of the cache kind's events (the cache on or off per run, buckets, local
    mode or a cluster, the driver's own apply, task attempts dying after any landing and run
    again on another executor, the expire job's deletes and marks, table TTLs set and removed
    between batches or during one) with the aggregate kind's JSON records applied through the
    real apply_aggregates and its bucket files: what a file vouches for is what the store
    holds, every key's measures are the brute force of its counted records (but keys changed
    from outside the stream), the bad records exactly the dead letters. Seeded as
    test_simulation.py is."""
    seed = 0 if settings.default.derandomize else random.SystemRandom().randrange(2**32)
    run_seed(seed, KNOWN_BUGS_EXCLUDED, EXAMPLES, store="aggregate-cache")
