"""What a key-value store's compaction strategy costs Cassandra under the stream's writes: the
same overwrites, as the apply sends them (prepared UNLOGGED batches), into a
partitioned-kv store made with each strategy, one after the other on the local stack;
Cassandra's CPU while writing and after a settling pause (compactions the writes started).

What it costs the readers: right after the writes and again after the pause, --gets point
gets of random keys through the library (`get`, what the CLI and the HTTP API run; p50 and
p99 wall time), and one read of --read-keys random keys as the apply reads them after a
restart (`read_entries`: `key IN` lists; µs per key).

    .venv/bin/python bench/micro/compaction_writes.py [--keys 300000] [--batches 8] [--settle 45]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from bench_common import cassandra_pid, cpu_ticks_of, scratch_keyspace

from statestore.core.codecs import encode_long
from statestore.core.model import Entry
from statestore.core.options import TableOptions
from statestore.store.builder import StoreBuilder
from statestore.store.tables import table_for

KEYSPACE = "bench_compaction_writes"
STRATEGIES = ("LeveledCompactionStrategy", "UnifiedCompactionStrategy", "SizeTieredCompactionStrategy")
TICKS = os.sysconf("SC_CLK_TCK")


def reads(session, table, keys: list[bytes], args, rng: random.Random) -> str:
    """Point gets' p50 / p99 (ms) and the apply's multi-key read (µs per key) of random keys."""
    latencies = []
    for key in rng.sample(keys, args.gets):
        began = time.perf_counter()
        if table.get(session, key) is None:
            raise AssertionError(f"key {key!r} was written but is missing")
        latencies.append((time.perf_counter() - began) * 1000)
    cut = statistics.quantiles(latencies, n=100)
    wanted = rng.sample(keys, args.read_keys)
    began = time.perf_counter()
    found = table.read_entries(session, wanted, args.concurrency)
    per_key = (time.perf_counter() - began) / len(wanted) * 1e6
    if len(found) != len(wanted):
        raise AssertionError(f"read {len(found)} of {len(wanted)} written keys")
    return f"get p50 {cut[49]:.2f} / p99 {cut[98]:.2f} ms, read_entries {per_key:.1f} µs per key"


def one_strategy(strategy: str, args, keys: list[bytes]) -> tuple[float, float, float, str, str]:
    """(wall s, Cassandra CPU s while writing, and after the settling pause, and the reads
    right after the writes and after the pause) of one store."""
    with scratch_keyspace(KEYSPACE) as (_config, session):
        builder = StoreBuilder(session, "words").with_keyspace(KEYSPACE)
        store = builder.with_table_options(TableOptions(compaction=strategy)).partitioned_key_value_store(4).create()
        table = table_for(store.spec)
        rng = random.Random(15)
        pid = cassandra_pid()
        began_cpu, began = cpu_ticks_of(pid), time.perf_counter()
        written: set[bytes] = set()
        for batch in range(args.batches):
            sample = rng.sample(keys, len(keys) // 2)  # each batch overwrites half the keys
            written.update(sample)
            rows = [Entry(key, encode_long(batch), batch, 1_700_000_000_000) for key in sample]
            table.write_entries(session, rows, args.concurrency, 1000 * (batch + 1))
        wall = time.perf_counter() - began
        writing = (cpu_ticks_of(pid) - began_cpu) / TICKS
        readable = sorted(written)
        before_reads = cpu_ticks_of(pid)
        read_now = reads(session, table, readable, args, rng) if args.gets else ""
        reading = cpu_ticks_of(pid) - before_reads
        time.sleep(args.settle)
        # The reads' own CPU is left out: what the writes cost, with the compactions they started.
        settled = (cpu_ticks_of(pid) - began_cpu - reading) / TICKS
        read_settled = reads(session, table, readable, args, rng) if args.gets else ""
    return wall, writing, settled, read_now, read_settled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=300_000)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--settle", type=float, default=45.0, help="seconds to wait for compactions after writing")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--gets", type=int, default=2000, help="point gets per measurement (0: no reads)")
    parser.add_argument("--read-keys", type=int, default=20_000, help="keys of the apply's multi-key read")
    args = parser.parse_args()
    keys = [os.urandom(5).hex().encode() for _ in range(args.keys)]
    writes = args.batches * (args.keys // 2)
    print(f"{writes:,} writes over {args.keys:,} keys in {args.batches} batches:")
    for strategy in args.strategies.split(","):
        wall, writing, settled, read_now, read_settled = one_strategy(strategy, args, keys)
        print(
            f"  {strategy:30s} wall {wall:5.1f} s  Cassandra CPU {writing:5.1f} s writing,"
            f" {settled:5.1f} s with {args.settle:.0f} s settling ({settled / writes * 1e6:.1f} µs per write)"
        )
        if args.gets:
            print(f"    reads after the writes: {read_now}\n    after settling:         {read_settled}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
