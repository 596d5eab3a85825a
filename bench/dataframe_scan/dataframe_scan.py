"""A store's full scan as a Spark DataFrame (the livestate data source) against the CLI's
(`statestore dump`), in rows per second, on the same store (BENCHMARKS.md).

One store of --entries entries (a partitioned-kv store of --partitions partitions by default;
string keys, long values, as the word count writes them) is loaded and flushed, scanned once
each way untimed (Cassandra's caches, and Spark's Python workers, which a session starts on its
first read, warm for both), then --rounds times each way, the two ways alternating (dump first
in odd rounds):

- `statestore dump STORE --format csv` run as a user runs it (its own process, its output
  counted through a pipe), timed from the start of the process to its exit;
- `spark.read.format("livestate").option("store", STORE).load().count()` on a SparkSession
  started beforehand (local[2] as in every benchmark here: its start-up is not timed; the
  data source's planning, the executors' reads and decoding into Arrow are).

Both check that they saw every entry. Rows/s are entries per second of wall time; the report
gives each round and the medians.

    .venv/bin/python bench/dataframe_scan/dataframe_scan.py                     # 1M entries
    .venv/bin/python bench/dataframe_scan/dataframe_scan.py --entries 100000    # quick

Needs the local stack (make stack-up; STATESTORE_* for other ports); works in its own keyspace
(bench_dataframe), dropped at the end unless --keep (a rerun with --keep skips loading).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from bench_common import machine_description, results_dir, settle_compactions

from statestore.conn.cassandra import DDL_PROFILE, create_keyspace, session_for
from statestore.conn.spark import build_session
from statestore.core import config as cfg
from statestore.core.codecs import encode_long
from statestore.core.config import CassandraConfig
from statestore.core.model import Entry, StoreType
from statestore.dataframe import register
from statestore.maintenance.shared.nodetool import Nodetool, NodetoolConfig
from statestore.store.book import registry
from statestore.store.builder import StoreBuilder

KEYSPACE = "bench_dataframe"
STORE = "scan"
_LOAD_CHUNK = 20_000
_TIME_MS = 1_764_000_000_000


def _key(i: int) -> str:
    return f"word-{i:09d}"


def load(session, store_type: StoreType, entries: int, partitions: int) -> None:
    """The store with `entries` entries, made unless it already holds them (a --keep rerun)."""
    builder = StoreBuilder(session, STORE).with_keyspace(KEYSPACE)
    if registry.find(session, KEYSPACE, STORE) is not None:
        return
    store = (
        builder.global_key_value_store()
        if store_type is StoreType.GLOBAL_KV
        else builder.partitioned_key_value_store(partitions)
    ).create()
    started = time.perf_counter()
    for low in range(0, entries, _LOAD_CHUNK):
        batch = [
            Entry(_key(i).encode(), encode_long(i % 997 + 1), 1, _TIME_MS)
            for i in range(low, min(entries, low + _LOAD_CHUNK))
        ]
        store.table.write_entries(session, batch, 256, None)
    print(f"loaded {entries:,} entries in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    try:  # scans read SSTables, as on a store that has run a while
        settle_compactions(Nodetool.locate(cfg.resolve(NodetoolConfig)), KEYSPACE, store.spec.table)
    except Exception as exc:  # noqa: BLE001 - a scan of memtables flatters both ways alike: say so, go on
        print(f"could not flush: {exc}; scanning what is in memory too", file=sys.stderr)


def dump_rate(entries: int) -> dict:
    """`statestore dump` in its own process, its CSV counted line by line."""
    command = [sys.executable, "-m", "statestore", "dump", STORE, "--format", "csv", "--keyspace", KEYSPACE]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "0"})
    lines = 0
    while chunk := process.stdout.read(1 << 20):
        lines += chunk.count(b"\n")
    code = process.wait()
    took = time.perf_counter() - started
    rows = lines - 1  # the header
    if code != 0 or rows != entries:
        raise SystemExit(f"statestore dump exited {code} after {rows:,} rows, expected {entries:,}")
    return {"rows": rows, "seconds": round(took, 3), "rows_per_s": round(rows / took)}


def dataframe_rate(spark, entries: int, splits: int | None) -> dict:
    """The store read as a DataFrame and counted."""
    started = time.perf_counter()
    reader = spark.read.format("livestate").option("store", STORE).option("keyspace", KEYSPACE)
    if splits is not None:
        reader = reader.option("splits", splits)
    frame = reader.load()
    rows = frame.count()
    took = time.perf_counter() - started
    if rows != entries:
        raise SystemExit(f"the DataFrame counted {rows:,} rows, expected {entries:,}")
    return {
        "rows": rows,
        "seconds": round(took, 3),
        "rows_per_s": round(rows / took),
        "input_partitions": frame.rdd.getNumPartitions(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000, help="entries of the store (1,000,000)")
    parser.add_argument("--partitions", type=int, default=4, help="store partitions, partitioned-kv (4)")
    parser.add_argument(
        "--store-type", choices=[StoreType.PARTITIONED_KV.value, StoreType.GLOBAL_KV.value], default="partitioned-kv"
    )
    parser.add_argument("--splits", type=int, help="the data source's splits option (default: its own default)")
    parser.add_argument("--rounds", type=int, default=3, help="scans each way, alternating (3)")
    parser.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    parser.add_argument("--keep", action="store_true", help="keep the keyspace (a rerun skips loading)")
    parser.add_argument("--json", type=Path, help="raw result file (default: results_dir, bench/README.md)")
    args = parser.parse_args()
    out = args.json or results_dir("dataframe_scan", "dataframe_scan.json")

    config = cfg.resolve(CassandraConfig, overrides={"keyspace": KEYSPACE})
    session = session_for(config)
    create_keyspace(session, KEYSPACE)
    script_started = time.perf_counter()
    spark = build_session("bench-dataframe-scan", master=args.master, conf={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("WARN")
    try:
        register(spark)
        load(session, StoreType(args.store_type), args.entries, args.partitions)
        load_before = round(os.getloadavg()[0], 2)
        warmup = {"dump": dump_rate(args.entries), "dataframe": dataframe_rate(spark, args.entries, args.splits)}
        print(f"warm-up: {json.dumps(warmup)}", file=sys.stderr)
        runs = []
        for round_ in range(args.rounds):
            order = ("dump", "dataframe") if round_ % 2 == 0 else ("dataframe", "dump")
            result = {}
            for way in order:
                result[way] = (
                    dump_rate(args.entries) if way == "dump" else dataframe_rate(spark, args.entries, args.splits)
                )
                print(f"round {round_ + 1}: {way} {result[way]['rows_per_s']:,} rows/s", file=sys.stderr)
            runs.append({"order": list(order), **result})
        dump_median = statistics.median(r["dump"]["rows_per_s"] for r in runs)
        frame_median = statistics.median(r["dataframe"]["rows_per_s"] for r in runs)
        report = {
            "benchmark": "dataframe_scan",
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join(["bench/dataframe_scan/dataframe_scan.py", *sys.argv[1:]]),
            "machine": machine_description(spark.version, session),
            "settings": {
                "entries": args.entries,
                "store_type": args.store_type,
                "partitions": args.partitions,
                "splits": args.splits,
                "rounds": args.rounds,
                "master": args.master,
                "load_average_before": load_before,
                "load_average_after": round(os.getloadavg()[0], 2),
                "script_s": round(time.perf_counter() - script_started, 1),
            },
            "warmup": warmup,
            "runs": runs,
            "summary": {
                "dump_rows_per_s": round(dump_median),
                "dataframe_rows_per_s": round(frame_median),
                "x_dump": round(frame_median / dump_median, 2),
                "input_partitions": runs[-1]["dataframe"]["input_partitions"],
            },
        }
    finally:
        spark.stop()
        if not args.keep:
            session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", execution_profile=DDL_PROFILE, timeout=120)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["summary"], indent=2))
    print(f"raw results: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
