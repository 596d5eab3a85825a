"""Window tables under TimeWindowCompactionStrategy (their default) and the alternatives.

One partitioned-window store per strategy, the same workload for each: event time runs for
--minutes minutes; each minute is one storage segment (and one TWCS window: rows carry their
event time as the write timestamp, as a live stream's do) holding --keys keys in each of its
10 s windows. After each minute the memtable is flushed (an SSTable per minute, as a stream
writing for a minute would leave) and the segments past the 3-minute retention are dropped,
as the expire job does (stamped with the simulated clock, see drop_expired). Measured per
strategy:

- writes: rows per second of the window writes (the same UNLOGGED per-partition batches as the
  stream's apply);
- compaction: how many compactions ran and the bytes they read and wrote for the table
  (system.compaction_history): the rewriting a strategy costs beyond the flushes;
- at the end, after compactions settle: SSTables, live bytes on disk, and how many SSTables a
  read touched (nodetool tablehistograms, p50 and max);
- reads: latency of fetching one key's windows over the last two minutes (WindowStore.fetch),
  p50 and p99 over --reads random keys;
- reclaiming: `nodetool garbagecollect` (single-SSTable compactions that drop data shadowed by
  the segments' partition deletes): its time, and the live bytes and SSTables after it. The
  retained data is 3 of the --minutes minutes; whatever more is on disk is expired data.

    .venv/bin/python bench/window_compaction/window_compaction.py
    .venv/bin/python bench/window_compaction/window_compaction.py --minutes 10 --keys 1000 --reads 200   # quick

Needs the local stack (scripts/stack up) and nodetool; works in its own keyspace
(bench_windows), dropped at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from datetime import UTC
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from bench_common import results_dir, settle_compactions

from statestore.conn.cassandra import DDL_PROFILE, create_keyspace, session_for
from statestore.core import config as cfg
from statestore.core.codecs import encode_long
from statestore.core.config import CassandraConfig
from statestore.core.model import WindowedEntry
from statestore.core.options import TableOptions
from statestore.core.windows import WindowSpec
from statestore.maintenance.shared.nodetool import Nodetool, NodetoolConfig, parse_histograms
from statestore.store.builder import StoreBuilder

KEYSPACE = "bench_windows"
MINUTE_MS = 60_000
WINDOWING = WindowSpec(10_000, grace_ms=0, retention_ms=3 * MINUTE_MS, segment_ms=MINUTE_MS)
STRATEGIES = {
    "twcs": None,  # the window table's default: TWCS, one compaction window per segment
    # The seed library's compaction (the key-value tables' default until 26 Nov, UCS since);
    # its sub-option is Cassandra's default value, spelled out as when the runs were made.
    "lcs": TableOptions(compaction="LeveledCompactionStrategy", compaction_options={"sstable_size_in_mb": "160"}),
    "stcs": TableOptions(compaction="SizeTieredCompactionStrategy"),  # Cassandra's own default
    "ucs": TableOptions(compaction="UnifiedCompactionStrategy"),  # Cassandra 5's recommended one
}


def compaction_bytes(session, table: str, since_ms: int) -> tuple[int, int, int]:
    """(compactions, bytes read, bytes written) of `table`'s compactions since `since_ms` (the
    history outlives a dropped table of the same name)."""
    rows = session.execute(
        "SELECT keyspace_name, columnfamily_name, compacted_at, bytes_in, bytes_out FROM system.compaction_history"
    )
    mine = [
        r
        for r in rows
        if (r.keyspace_name, r.columnfamily_name) == (KEYSPACE, table)
        and r.compacted_at.replace(tzinfo=UTC).timestamp() * 1000 >= since_ms
    ]
    return len(mine), sum(r.bytes_in for r in mine), sum(r.bytes_out for r in mine)


def drop_expired(session, store, stream_time_ms: int) -> None:
    """The expire job's segment drops (WindowStore.drop_expired), but stamped with the simulated
    clock: live, a drop runs when the wall clock is near the stream time, so its tombstones
    fall in the newest TWCS window. Stamped with the real clock here they would land in one
    window far after all the data, and TWCS would see every SSTable as current."""
    table = store.table
    delete = session.prepare(f"DELETE FROM {table.qualified} USING TIMESTAMP ? WHERE partition = ? AND segment = ?")
    for segment in WINDOWING.expired_segments(table.segments(session), stream_time_ms):
        for partition in range(store.spec.partitions):
            session.execute(delete, (stream_time_ms * 1000, partition, segment))


def run_strategy(session, nodetool: Nodetool, name: str, options, args, rng: random.Random) -> dict:
    began_ms = int(time.time() * 1000)
    builder = StoreBuilder(session, f"w_{name}").with_keyspace(KEYSPACE)
    if options is not None:
        builder = builder.with_table_options(options)
    store = builder.partitioned_window_store(WINDOWING, args.partitions).create()
    table = store.table
    described = dict(session.cluster.metadata.keyspaces[KEYSPACE].tables[store.spec.table].options["compaction"])
    base = (int(time.time() * 1000) // MINUTE_MS - args.minutes - 1) * MINUTE_MS
    keys = [f"word-{i:06d}".encode() for i in range(args.keys)]
    written, write_s = 0, 0.0
    for minute in range(args.minutes):
        start_of_minute = base + minute * MINUTE_MS
        entries = [
            WindowedEntry(key, start, encode_long(rng.randint(1, 50)), minute, start + 9_999)
            for start in range(start_of_minute, start_of_minute + MINUTE_MS, WINDOWING.size_ms)
            for key in keys
        ]
        began = time.monotonic()
        table.write(session, entries, args.concurrency, start_of_minute * 1000 + 59_999_000)
        write_s += time.monotonic() - began
        written += len(entries)
        nodetool.flush(KEYSPACE, store.spec.table)
        drop_expired(session, store, start_of_minute + MINUTE_MS)
    settle_s = settle_compactions(nodetool, KEYSPACE, store.spec.table)
    compactions, bytes_in, bytes_out = compaction_bytes(session, store.spec.table, began_ms)
    stats = nodetool.tablestats(KEYSPACE, store.spec.table)
    now = base + args.minutes * MINUTE_MS
    latencies = []
    for key in rng.choices(range(args.keys), k=20):  # warm-up: statements prepared, connections open
        list(store.fetch(f"word-{key:06d}", now - 2 * MINUTE_MS, now, stream_time_ms=now))
    for key in rng.choices(range(args.keys), k=args.reads):
        began = time.perf_counter()
        got = list(store.fetch(f"word-{key:06d}", now - 2 * MINUTE_MS, now, stream_time_ms=now))
        latencies.append((time.perf_counter() - began) * 1000)
        assert len(got) == 12, (key, len(got))  # two minutes of 10 s windows, none expired yet
    sstables_per_read = parse_histograms(nodetool.run("tablehistograms", KEYSPACE, store.spec.table), "SSTables")
    latencies.sort()
    # What expired segments still hold on disk, and what reclaiming it costs: garbagecollect
    # rewrites each SSTable without the data the segment deletes shadow.
    began = time.monotonic()
    nodetool.garbagecollect(KEYSPACE, store.spec.table)
    collect_s = time.monotonic() - began
    collected = nodetool.tablestats(KEYSPACE, store.spec.table)
    row = {
        "strategy": name,
        "compaction": described,
        "rows_written": written,
        "write_rows_per_s": round(written / write_s),
        "compactions": compactions,
        "compaction_bytes_in": bytes_in,
        "compaction_bytes_out": bytes_out,
        "live_bytes": int(float(stats.get("space_used_live") or 0)),
        "sstables": int(stats.get("sstable_count") or 0),
        "sstables_per_read_p50": sstables_per_read.get("50%"),
        "sstables_per_read_max": sstables_per_read.get("Max"),
        "read_p50_ms": round(statistics.median(latencies), 2),
        "read_p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 2),
        "settle_s": settle_s,
        "garbagecollect_s": round(collect_s, 1),
        "live_bytes_after_garbagecollect": int(float(collected.get("space_used_live") or 0)),
        "sstables_after_garbagecollect": int(collected.get("sstable_count") or 0),
    }
    print(json.dumps(row), file=sys.stderr)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=30, help="minutes of event time (segments) per strategy")
    parser.add_argument("--keys", type=int, default=15000, help="keys per 10 s window (default 15000)")
    parser.add_argument("--partitions", type=int, default=8, help="store partitions (default 8)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--reads", type=int, default=500, help="timed key fetches per strategy")
    parser.add_argument(
        "--strategies", default=",".join(STRATEGIES), help="comma-separated, of " + ", ".join(STRATEGIES)
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=results_dir("window_compaction", "window_compaction.json"),
        help="write the figures here (.stack/bench-results/window_compaction/; published: bench/results/...)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the keyspace")
    args = parser.parse_args(argv)
    config = cfg.resolve(CassandraConfig, overrides={"keyspace": KEYSPACE})
    session = session_for(config)
    nodetool = Nodetool.locate(cfg.resolve(NodetoolConfig))
    if nodetool is None:
        parser.error("nodetool is needed (the local stack's, or STATESTORE_NODETOOL)")
    session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", execution_profile=DDL_PROFILE, timeout=300)
    create_keyspace(session, KEYSPACE)
    rows = []
    try:
        for name in args.strategies.split(","):
            rows.append(run_strategy(session, nodetool, name, STRATEGIES[name], args, random.Random(16)))
    finally:
        if not args.keep:
            session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", execution_profile=DDL_PROFILE, timeout=300)
    result = {"settings": {k: v for k, v in vars(args).items() if k != "json"}, "runs": rows}
    print(json.dumps(result, indent=2, default=str))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
