"""Audit and expiry throughput at 1 million and 10 million entries (BENCHMARKS.md).

For each size N: a partitioned-kv store (--partitions store partitions) is loaded with N
entries by Spark tasks (half of them 3 days behind the stream's time, half 1 hour behind),
flushed, then
  - audited (statestore.maintenance.audit.partitions: token-range scan in Spark tasks, partition sizes,
    Cassandra's figures), timed from the first Spark task to the merged summary;
  - scanned for expiry (a dry run: the expiry's scan and selection, no delete), then
  - expired with a 2-day retention in stream time (statestore.maintenance.expire.entries: the same
    scan, plus a timestamped delete of the old half), timed the same way.
Before each measured phase Cassandra is flushed and left to finish its compactions, so no
phase pays for the previous one's background work; the waits are reported.
Rows/s are entries scanned per second of wall time; the growth from the smallest to the
largest size shows whether the time is linear in N.

    .venv/bin/python bench/maintenance/maintenance.py                       # 1M and 10M
    .venv/bin/python bench/maintenance/maintenance.py --sizes 100000,1000000   # quick
    .venv/bin/python bench/maintenance/maintenance.py --json bench-maintenance.json   # default: bench/README.md

Needs the local stack (scripts/stack up; STATESTORE_* for other ports); works in its own
keyspace (bench_maintenance), dropped at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from bench_common import results_dir, settle_compactions

from statestore.conn.cassandra import DDL_PROFILE, create_keyspace, session_for
from statestore.conn.spark import build_session
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.model import StoreSpec, StoreType
from statestore.maintenance.audit.partitions import AuditOptions, audit
from statestore.maintenance.expire.entries import ExpireOptions, expire
from statestore.maintenance.shared.nodetool import Nodetool, NodetoolConfig
from statestore.maintenance.shared.selection import Thresholds, TimeBasis
from statestore.store.book import registry
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.store.provision import provision_store
from statestore.stream.position import now_micros

KEYSPACE = "bench_maintenance"
STREAM_TIME_MS = 1_750_000_000_000
DAY_MS = 86_400_000


def load_task(config: CassandraConfig, spec: StoreSpec, write_ts: int):
    """Spark task: write entries [low, high) of the store: even ids old, odd ids recent."""

    def run(bounds):
        from statestore.conn.cassandra import session_for
        from statestore.core.codecs import encode_long
        from statestore.core.model import Entry
        from statestore.store.tables import table_for

        session = session_for(config)
        table = table_for(spec)
        for low, high in bounds:
            for start in range(low, high, 20_000):
                entries = [
                    Entry(
                        f"word-{i:010d}".encode(),
                        encode_long(i % 1000 + 1),
                        1,
                        STREAM_TIME_MS - (3 * DAY_MS if i % 2 == 0 else 3_600_000),
                    )
                    for i in range(start, min(high, start + 20_000))
                ]
                table.write_entries(session, entries, 128, write_ts)
        yield high - low

    return run


def load(spark, session, config: CassandraConfig, name: str, entries: int, partitions: int) -> tuple[StoreSpec, float]:
    spec = provision_store(session, StoreSpec(KEYSPACE, name, StoreType.PARTITIONED_KV, partitions))
    step = 250_000
    bounds = [(low, min(entries, low + step)) for low in range(0, entries, step)]
    began = time.monotonic()
    spark.sparkContext.parallelize(bounds, len(bounds)).mapPartitions(load_task(config, spec, now_micros())).count()
    registry.record_batch(
        session,
        spec,
        BatchPosition(batch_id=1, write_ts=now_micros(), start=None, end=KafkaOffsets.parse('{"t":{"0":1}}')),
        STREAM_TIME_MS,
    )
    return spec, time.monotonic() - began


def settle(nodetool, spec: StoreSpec, limit_s: float = 1800) -> float:
    return settle_compactions(nodetool, KEYSPACE, spec.table, limit_s)


def measure(spark, session, config: CassandraConfig, nodetool, entries: int, partitions: int, ranges: int) -> dict:
    name = f"bench_{entries}"
    spec, load_s = load(spark, session, config, name, entries, partitions)
    print(f"{entries:,} entries: loaded in {load_s:.0f} s ({entries / load_s:,.0f}/s)", file=sys.stderr)
    settled = {"after_load": settle(nodetool, spec)}
    options = AuditOptions(thresholds=Thresholds(), token_ranges=ranges)
    report = audit(spark, session, config, options, [name], nodetool)
    audited = report.stores[0]
    assert audited.entries == entries, (audited.entries, entries)
    row = {
        "entries": entries,
        "partitions": partitions,
        "load_s": round(load_s, 1),
        "audit_s": report.seconds,
        "audit_rows_per_s": report.rows_per_s,
        "audit_largest_partition_bytes": audited.largest.bytes,
        "audit_vs_cassandra": audited.agreement,
    }
    print(f"  audit: {report.seconds:.1f} s, {report.rows_per_s:,.0f} rows/s", file=sys.stderr)
    # The scan alone (a dry run deletes nothing), then the real expiry with its deletes.
    dry = expire(
        spark, session, config, [name], ExpireOptions(TimeBasis.STREAM, 2 * DAY_MS, dry_run=True, token_ranges=ranges)
    )
    row.update(expire_scan_s=dry.seconds, expire_scan_rows_per_s=dry.rows_per_s)
    print(f"  expiry scan (dry run): {dry.seconds:.1f} s, {dry.rows_per_s:,.0f} rows/s", file=sys.stderr)
    settled["before_expiry"] = settle(nodetool, spec)
    expiry = expire(spark, session, config, [name], ExpireOptions(TimeBasis.STREAM, 2 * DAY_MS, token_ranges=ranges))
    expired = expiry.stores[0]
    assert expired.removed == entries // 2, (expired.removed, entries)
    row.update(
        expire_s=expiry.seconds,
        expire_rows_per_s=expiry.rows_per_s,
        expire_deletes_per_s=round(expired.removed / expiry.seconds, 1),
        removed=expired.removed,
    )
    settled["after_expiry"] = settle(nodetool, spec)
    row["compaction_settle_s"] = settled
    print(
        f"  expiry: {expiry.seconds:.1f} s, {expiry.rows_per_s:,.0f} rows/s, {expired.removed:,} deleted",
        file=sys.stderr,
    )
    return row


def machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": os.getloadavg(),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="entries per run, comma-separated")
    parser.add_argument("--partitions", type=int, default=64, help="store partitions (default 64)")
    parser.add_argument("--token-ranges", type=int, default=8, help="token ranges (Spark tasks) per scan (default 8)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--json",
        type=Path,
        default=results_dir("maintenance", "maintenance.json"),
        help="write the figures here (.stack/bench-results/maintenance/; published: bench/results/maintenance/)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the keyspace")
    args = parser.parse_args(argv)
    config = cfg.resolve(CassandraConfig, overrides={"keyspace": KEYSPACE})
    session = session_for(config)
    create_keyspace(session, KEYSPACE)
    nodetool = Nodetool.locate(cfg.resolve(NodetoolConfig))
    spark = build_session("bench-maintenance", args.master, {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("WARN")
    rows = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            rows.append(measure(spark, session, config, nodetool, size, args.partitions, args.token_ranges))
    finally:
        if not args.keep:
            session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", execution_profile=DDL_PROFILE, timeout=300)
        spark.stop()
    first, last = rows[0], rows[-1]
    growth = last["entries"] / first["entries"]
    result = {
        "machine": machine(),
        "runs": rows,
        "growth": {
            "entries": growth,
            "audit_time": round(last["audit_s"] / first["audit_s"], 2),
            "expire_scan_time": round(last["expire_scan_s"] / first["expire_scan_s"], 2),
            "expire_time": round(last["expire_s"] / first["expire_s"], 2),
        },
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
