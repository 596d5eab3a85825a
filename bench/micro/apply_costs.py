"""What the apply's per-key Python steps cost, each the way it was and the way it is, side by
side in one run, on the executor-side code alone (no server: the statement is the
driver's own PreparedStatement over the partitioned-kv batch's columns).

- binding a 64-row batch: the driver's `PreparedStatement.bind` against
  statestore.store.tables.unlogged.bind_serialized (the same bytes, checked);
- hashing keys to partitions: core.partitioner.partition_for per key against partitions_for
  over a slice (the same partitions, checked);
- making the apply's per-key records: a frozen dataclass (Entry and Delta before) against the
  named tuples they are now.

    .venv/bin/python bench/micro/apply_costs.py [--keys 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from bench_common import make_vocabulary
from cassandra.cqltypes import BytesType, DateType, Int32Type, LongType
from cassandra.protocol import ColumnMetadata
from cassandra.query import PreparedStatement

from statestore.core.model import Entry
from statestore.core.partitioner import partition_for, partitions_for
from statestore.store.tables.unlogged import bind_serialized

ROWS_PER_BATCH = 64  # partitioned_kv._BATCH_ROWS
PARTITIONS = 4


@dataclass(frozen=True)
class FrozenEntry:
    """Entry as it was: a frozen dataclass."""

    key: bytes
    value: bytes
    batch_id: int | None = None
    time_ms: int | None = None


def batch_statement() -> PreparedStatement:
    """The partitioned-kv batch of 64 rows: its timestamp, then (partition, key, value, time,
    batch_id) per row."""
    row = [Int32Type, BytesType, BytesType, DateType, LongType]
    types = [LongType] + row * ROWS_PER_BATCH
    columns = [ColumnMetadata("ks", "t", f"c{i}", cql_type) for i, cql_type in enumerate(types)]
    return PreparedStatement(columns, b"id", None, "BATCH", "ks", 5, None, None)


def per_key_micros(step, keys: int, rounds: int) -> float:
    """The median over `rounds` of `step()`'s CPU time, in µs per key."""
    times = []
    for _ in range(rounds):
        began = time.process_time()
        step()
        times.append(time.process_time() - began)
    return statistics.median(times) / keys * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20_000, help="keys per slice (the apply's SLICE)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(15)
    keys = [word.encode() for word in make_vocabulary(args.keys, rng)]
    pack = struct.Struct(">q").pack
    statement = batch_statement()
    batches = []
    for start in range(0, len(keys) - ROWS_PER_BATCH + 1, ROWS_PER_BATCH):
        values = [1_700_000_000_000_000]
        for i, key in enumerate(keys[start : start + ROWS_PER_BATCH]):
            values += [i % PARTITIONS, key, pack(i), 1_700_000_000_000 + i, 7]
        batches.append(values)
    bound_rows = len(batches) * ROWS_PER_BATCH
    assert all(bind_serialized(statement, v).values == statement.bind(v).values for v in batches[:20])
    assert partitions_for(keys, PARTITIONS) == [partition_for(k, PARTITIONS) for k in keys]

    steps = {
        "bind a 64-row batch, per row": (
            bound_rows,
            lambda: [statement.bind(v) for v in batches],
            lambda: [bind_serialized(statement, v) for v in batches],
        ),
        "partition of a key": (
            len(keys),
            lambda: [partition_for(k, PARTITIONS) for k in keys],
            lambda: partitions_for(keys, PARTITIONS),
        ),
        "make an entry": (
            len(keys),
            lambda: [FrozenEntry(k, k, 7, 1) for k in keys],
            lambda: [Entry(k, k, 7, 1) for k in keys],
        ),
    }
    print(f"{args.keys:,} keys, median of {args.rounds} rounds, CPU µs per key (or row):")
    print(f"  {'step':32s} {'before':>8s} {'now':>8s} {'saved':>8s}")
    for name, (count, before, now) in steps.items():
        was, is_ = (per_key_micros(step, count, args.rounds) for step in (before, now))
        print(f"  {name:32s} {was:8.2f} {is_:8.2f} {was - is_:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
