"""The replay-overhead benchmark's baseline: the word count's apply without replay safety, as
blind counter increments on a counter table of the store's layout.

`counter_applier` is a drop-in for statestore.stream.apply.partition_applier (passed as
BatchSeams.make_applier), so everything else of the job (Kafka read, tokenization,
aggregation, foreachBatch bookkeeping, dead letters) is the job as shipped. Its functions run
on Spark's executors, which do not have bench/ on their path: replay_overhead.py registers
this module for pickling by value (cloudpickle.register_pickle_by_value). So it imports
nothing of bench/, only statestore and the Cassandra driver, which the executors have.
"""

from __future__ import annotations

import time

from statestore.stream.apply import ApplyStats, Delta, deltas_of

# These mirror how the partitioned-kv table (statestore.store.tables.partitioned_kv) batches
# its writes, so the baseline's batches are the store's: a new batch at 64 rows or from about
# 4 KiB (Cassandra warns past 5 KiB). Kept here rather than imported, as they are private to
# the table: if it changes them, change them here too.
BATCH_BYTES = 4096
BATCH_ROWS = 64


def counter_table(store: str) -> str:
    return f"{store}_counts"


def counter_table_cql(keyspace: str, store: str, global_layout: bool) -> str:
    """A counter table with the store's layout, ((partition), key) or key alone (global-kv),
    and the store's compaction strategy."""
    from statestore.core.options import DEFAULT_COMPACTION

    if global_layout:
        columns = "key blob PRIMARY KEY, value counter"
    else:
        columns = "partition int, key blob, value counter, PRIMARY KEY ((partition), key)"
    return (
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{counter_table(store)} ({columns})"
        f" WITH compaction = {{'class': '{DEFAULT_COMPACTION}'}}"
    )


def _statements(update, deltas: list[Delta], partitions: int, global_layout: bool) -> list:
    """The slice's increments as (statement, parameters) to send: per store partition in
    COUNTER batches cut like the store's (for a global-kv store, whose writes are one
    statement per key: one update per key)."""
    from collections import defaultdict

    from cassandra.query import BatchStatement, BatchType

    from statestore.core.partitioner import partition_for

    if global_layout:  # every key is its own partition: one statement per key
        return [(update, (d.amount, d.key)) for d in deltas]
    groups: dict[int, list[Delta]] = defaultdict(list)
    for d in deltas:
        groups[partition_for(d.key, partitions)].append(d)
    statements = []
    for partition, group in groups.items():
        batch, rows, size = None, 0, 0
        for d in group:
            if batch is None or size >= BATCH_BYTES or rows >= BATCH_ROWS:
                batch = BatchStatement(batch_type=BatchType.COUNTER)
                statements.append((batch, ()))
                rows, size = 0, 0
            batch.add(update, (d.amount, partition, d.key))
            rows += 1
            size += len(d.key) + 8 + 24
    return statements


def counter_applier(config, spec, batch_id: int, write_ts: int, version_ms: int | None = None, timer=None, cache=None):
    """A drop-in for statestore.stream.apply.partition_applier (same signature, same output:
    one ApplyStats per task) that applies the deltas as blind counter increments: no read, no
    batch tag, no write timestamp. Rows are decoded and sliced by the library's deltas_of (as
    the real apply does), grouped per partition as the store groups its writes, and sent with
    the same concurrency. With `timer` (an AccumulatorTimer) it reports its phases: group
    (partition + build batches) and write per slice, task per task, slices (1 per non-empty
    slice)."""
    table = f"{spec.keyspace}.{counter_table(spec.name)}"
    partitions = spec.partitions
    concurrency = config.write_concurrency
    global_layout = spec.store_type.value == "global-kv"

    def apply_slice(session, update, deltas: list[Delta]) -> ApplyStats:
        from cassandra.concurrent import execute_concurrent

        if not deltas:
            return ApplyStats()
        began = time.perf_counter()
        statements = _statements(update, deltas, partitions, global_layout)
        built = time.perf_counter()
        execute_concurrent(session, statements, concurrency=concurrency, raise_on_first_error=True)
        if timer is not None:
            timer("group", built - began)
            timer("write", time.perf_counter() - built)
            timer("slices", 1)
        times = [d.time_ms for d in deltas if d.time_ms is not None]
        return ApplyStats(len(deltas), len(deltas), 0, max(times) if times else None)

    def apply_partition(rows):
        from statestore.conn.cassandra import prepare, session_for

        task_began = time.perf_counter()
        session = session_for(config)
        where = "key = ?" if global_layout else "partition = ? AND key = ?"
        update = prepare(session, f"UPDATE {table} SET value = value + ? WHERE {where}")
        total = ApplyStats()
        for deltas in deltas_of(rows):
            total += apply_slice(session, update, deltas)
        if timer is not None:
            timer("task", time.perf_counter() - task_began)
        yield total

    return apply_partition
