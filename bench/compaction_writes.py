"""What a key-value store's compaction strategy costs Cassandra under the stream's writes (issue
15): the same overwrites, as the apply sends them (prepared UNLOGGED batches), into a
partitioned-kv store made with each strategy, one after the other on the local stack;
Cassandra's CPU while writing and after a settling pause (compactions the writes started).

    .venv/bin/python bench/compaction_writes.py [--keys 300000] [--batches 8] [--settle 45]
"""

from __future__ import annotations

import argparse
import os
import random
import time

from bench_common import cassandra_pid, cpu_ticks_of, scratch_keyspace

from statestore.core.codecs import encode_long
from statestore.core.model import Entry
from statestore.core.options import TableOptions
from statestore.store.builder import StoreBuilder
from statestore.store.tables import table_for

KEYSPACE = "bench_compaction_writes"
STRATEGIES = ("LeveledCompactionStrategy", "UnifiedCompactionStrategy", "SizeTieredCompactionStrategy")
TICKS = os.sysconf("SC_CLK_TCK")


def one_strategy(strategy: str, args, keys: list[bytes]) -> tuple[float, float, float]:
    """(wall s, Cassandra CPU s while writing, and after the settling pause) of one store."""
    with scratch_keyspace(KEYSPACE) as (_config, session):
        builder = StoreBuilder(session, "words").with_keyspace(KEYSPACE)
        store = builder.with_table_options(TableOptions(compaction=strategy)).partitioned_key_value_store(4).create()
        table = table_for(store.spec)
        rng = random.Random(15)
        pid = cassandra_pid()
        began_cpu, began = cpu_ticks_of(pid), time.perf_counter()
        for batch in range(args.batches):
            sample = rng.sample(keys, len(keys) // 2)  # each batch overwrites half the keys
            rows = [Entry(key, encode_long(batch), batch, 1_700_000_000_000) for key in sample]
            table.write_entries(session, rows, args.concurrency, 1000 * (batch + 1))
        wall = time.perf_counter() - began
        writing = (cpu_ticks_of(pid) - began_cpu) / TICKS
        time.sleep(args.settle)
        settled = (cpu_ticks_of(pid) - began_cpu) / TICKS
    return wall, writing, settled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=300_000)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--settle", type=float, default=45.0, help="seconds to wait for compactions after writing")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args()
    keys = [os.urandom(5).hex().encode() for _ in range(args.keys)]
    writes = args.batches * (args.keys // 2)
    print(f"{writes:,} writes over {args.keys:,} keys in {args.batches} batches:")
    for strategy in args.strategies.split(","):
        wall, writing, settled = one_strategy(strategy, args, keys)
        print(
            f"  {strategy:30s} wall {wall:5.1f} s  Cassandra CPU {writing:5.1f} s writing,"
            f" {settled:5.1f} s with {args.settle:.0f} s settling ({settled / writes * 1e6:.1f} µs per write)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
