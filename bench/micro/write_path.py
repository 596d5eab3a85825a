"""The apply's write path alone: the same rows written to a partitioned-kv store the
way the store did before (a BatchStatement assembled in the driver, one bound INSERT per row)
and as it does now (prepared UNLOGGED batches, statestore.store.tables.unlogged), alternating,
on the local stack, in its own keyspace (dropped at the end). Wall time and this process's CPU
per row; Cassandra's CPU is the difference the wall time shows.

    .venv/bin/python bench/micro/write_path.py [--rows 200000] [--rounds 3] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from bench_common import scratch_keyspace
from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType

from statestore.conn.cassandra import prepare
from statestore.core.codecs import encode_long
from statestore.core.model import Entry
from statestore.store.builder import StoreBuilder
from statestore.store.tables import table_for
from statestore.store.tables.base import chunked, unset_if_none

KEYSPACE = "bench_write_path"
ROWS_PER_BATCH = 64  # partitioned_kv._BATCH_ROWS


def assembled_batches(session, table, entries, concurrency, write_ts):
    """The store's earlier write: one BatchStatement per 64 rows (the
    old cut; this benchmark's rows are far under the byte bound, so rows alone decide it)."""
    upsert = prepare(
        session,
        f"INSERT INTO {table.qualified} (partition, key, value, time, batch_id) VALUES (?, ?, ?, ?, ?)"
        " USING TIMESTAMP ?",
    )
    upsert.is_idempotent = True
    work = []
    for partition, group in table._by_partition(entries).items():
        for rows in chunked(group, ROWS_PER_BATCH):
            batch = BatchStatement(batch_type=BatchType.UNLOGGED)
            for e in rows:
                batch.add(upsert, (partition, e.key, e.value, unset_if_none(e), e.batch_id, write_ts))
            work.append((batch, ()))
    execute_concurrent(session, work, concurrency=concurrency, raise_on_first_error=True)


def prepared_batches(session, table, entries, concurrency, write_ts):
    table.write_entries(session, entries, concurrency, write_ts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight (the job's write_concurrency)")
    args = parser.parse_args()
    with scratch_keyspace(KEYSPACE) as (_config, session):
        store = StoreBuilder(session, "writes").with_keyspace(KEYSPACE).partitioned_key_value_store(4).create()
        table = table_for(store.spec)
        entries = [Entry(os.urandom(4).hex().encode(), encode_long(i), 1, None) for i in range(args.rows)]
        ways = {"driver-assembled batch": assembled_batches, "prepared batch": prepared_batches}
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
        for round_ in range(args.rounds + 1):  # the first round warms up and is not counted
            for name, write in ways.items():
                cpu, wall = time.process_time(), time.perf_counter()
                write(session, table, entries, args.concurrency, 1_000_000 * (round_ + 1))
                if round_:
                    figures[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        print(f"{args.rows:,} rows, {args.rounds} rounds, {args.concurrency} in flight:")
        for name, runs in figures.items():
            wall = statistics.median(w for w, _ in runs) / args.rows * 1e6
            cpu = statistics.median(c for _, c in runs) / args.rows * 1e6
            rate = 1e6 / wall
            print(f"  {name:24s} {wall:6.1f} µs/row wall  {cpu:5.1f} µs/row client CPU  ({rate:,.0f} rows/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
