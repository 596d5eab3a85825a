"""The Cassandra write ceiling of the side-by-side benchmark (system `write-ceiling`).

Our job on a partitioned-kv store with the executor-side apply swapped (BatchSeams.make_applier)
for blind writes: each batch's distinct keys, decoded and sliced as the real apply does, are
written with the store's own `write_entries` (the same UNLOGGED per-partition batches, the same
concurrency, the same write timestamp) but nothing is read first and the value written is the
batch's delta, not a running total. So it is what any design pays that writes each distinct key
once per batch, and nothing more: no read, no replay safety, wrong counts (which is why the
worker checks only that every distinct word got a row).

Its functions run on Spark's executors, which do not have bench/ on their path: the worker
registers this module for pickling by value (cloudpickle.register_pickle_by_value), so it
imports nothing of bench/, only statestore, which the executors have.
"""

from __future__ import annotations

import time

from statestore.stream.apply import ApplyStats, deltas_of


def blind_applier(config, spec, batch_id: int, write_ts: int, version_ms: int | None = None, timer=None, cache=None):
    """A drop-in for statestore.stream.apply.partition_applier (same signature, one ApplyStats
    per task) that writes each delta as the key's value without reading anything. With `timer`
    it reports write per slice, task per task and slices."""

    def apply_partition(rows):
        from statestore.conn.cassandra import session_for
        from statestore.core.codecs import encode_long
        from statestore.core.model import Entry
        from statestore.store.tables import table_for

        began = time.perf_counter()
        session = session_for(config)
        table = table_for(spec)
        total = ApplyStats()
        for deltas in deltas_of(rows):
            if not deltas:
                continue
            writes = [Entry(d.key, encode_long(d.amount), batch_id, d.time_ms) for d in deltas]
            sent = time.perf_counter()
            table.write_entries(session, writes, config.write_concurrency, write_ts)
            if timer is not None:
                timer("write", time.perf_counter() - sent)
                timer("slices", 1)
            times = [d.time_ms for d in deltas if d.time_ms is not None]
            total += ApplyStats(len(deltas), len(writes), 0, max(times) if times else None)
        if timer is not None:
            timer("task", time.perf_counter() - began)
        yield total

    return apply_partition
