"""Interactive queries on the local stack: HTTP point gets and a full scan through the library.

(a) Point get through the HTTP API: `statestore serve` runs as its own process (no access log);
    one warm keep-alive httpx connection sends --requests sequential GET /stores/{s}/keys/{k}
    for random keys of a --keys-entry partitioned store, after one untimed get of every key. Two
    servers: without the read cache, and with it (--cache-entries covering the keys, a TTL longer
    than the run, so after the warm-up every read is a hit: the floor the cache gives); and, for
    reference, the same gets through the library with no HTTP. The variants alternate over
    --get-rounds rounds. Latency is client-side wall time per request (perf_counter).
(b) Full scan: a --scan-entries partitioned store (--partitions store partitions, written fast
    with table.write_entries), read end to end with the library's all() (every partition read
    concurrently, merged in key order, keys and values decoded). Entries/s over --scan-rounds
    rounds, best and median.

    .venv/bin/python bench/query_api.py                    # 5000 gets x2, 1M-entry scan x3
    .venv/bin/python bench/query_api.py --scan-entries 200000 --requests 2000   # quick
    .venv/bin/python bench/query_api.py --keep             # keep the loaded stores for a rerun
    .venv/bin/python bench/query_api.py --profile-scan     # cProfile of one scan, top functions

Needs the local stack (scripts/stack up; STATESTORE_* for other ports). Works in its own
keyspace (bench_query), dropped at the end unless --keep.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from statestore.builder import StoreBuilder, open_store  # noqa: E402
from statestore.cassandra import DDL_PROFILE, create_keyspace, session_for  # noqa: E402
from statestore.codecs import encode_long  # noqa: E402
from statestore.config import CassandraConfig, resolve  # noqa: E402
from statestore.stores.base import Entry  # noqa: E402

KEYSPACE = "bench_query"


def _key(i: int) -> str:
    return f"key-{i:09d}"


def load(session, name: str, entries: int, partitions: int) -> None:
    """Create and fill the store unless it already holds `entries` entries (a --keep rerun)."""
    store = StoreBuilder(session, name).with_keyspace(KEYSPACE).partitioned_key_value_store(partitions).create()
    # Chunks are written in order, so the last key means a complete earlier load (the scan checks the count).
    if store.get(_key(entries - 1)) == entries - 1 and store.get(_key(entries)) is None:
        print(f"  {name}: {entries:,} entries already loaded", file=sys.stderr)
        return
    started = time.perf_counter()
    now_ms = int(time.time() * 1000)  # every row has its time set, as the stream and put_all write them
    chunk = 100_000
    for low in range(0, entries, chunk):
        batch = [Entry(_key(i).encode(), encode_long(i), None, now_ms) for i in range(low, min(entries, low + chunk))]
        store.table.write_entries(session, batch, 256, None)
    took = time.perf_counter() - started
    print(f"  {name}: loaded {entries:,} entries in {took:.1f} s ({entries / took:,.0f}/s)", file=sys.stderr)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(*args: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    argv = [sys.executable, "-m", "statestore", "serve", "--port", str(port), "--keyspace", KEYSPACE]
    process = subprocess.Popen([*argv, "--no-access-log", "--log-level", "warning", *args])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/openapi.json").status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("statestore serve did not start within 60 s")


def point_gets(url: str, store: str, keys: int, requests: int, seed: int) -> list[float]:
    """Every key once, untimed (connection, prepared statements, store handle and, when on, the
    cache are warm), then `requests` timed gets of random keys; their latencies in seconds."""
    rng = random.Random(seed)
    warmup = list(range(keys))
    rng.shuffle(warmup)
    order = [rng.randrange(keys) for _ in range(requests)]
    latencies = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for i in warmup:
            client.get(f"/stores/{store}/keys/{_key(i)}").raise_for_status()
        for i in order:
            started = time.perf_counter()
            response = client.get(f"/stores/{store}/keys/{_key(i)}")
            latencies.append(time.perf_counter() - started)
            if response.status_code != 200 or response.json()["value"] != i:
                raise SystemExit(f"wrong answer for {_key(i)}: {response.status_code} {response.text}")
    return latencies


def library_gets(session, store: str, keys: int, requests: int, seed: int) -> list[float]:
    """The same gets straight through the library (no HTTP): the Cassandra part of the latency."""
    handle = open_store(session, KEYSPACE, store)
    rng = random.Random(seed)
    for i in range(keys):
        handle.get(_key(i))
    latencies = []
    for _ in range(requests):
        i = rng.randrange(keys)
        started = time.perf_counter()
        value = handle.get(_key(i))
        latencies.append(time.perf_counter() - started)
        if value != i:
            raise SystemExit(f"wrong value for {_key(i)}: {value}")
    return latencies


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000

    return (
        f"p50 {pct(50):.2f} ms, p90 {pct(90):.2f} ms, **p99 {pct(99):.2f} ms**, max {ordered[-1] * 1000:.1f} ms "
        f"({len(ordered) / sum(ordered):,.0f} req/s)"
    )


def scan(session, name: str, expected: int) -> float:
    store = open_store(session, KEYSPACE, name)
    started = time.perf_counter()
    count, previous = 0, ""
    for key, _value in store.all():
        count += 1
        previous = key
    took = time.perf_counter() - started
    if count != expected or previous != _key(expected - 1):
        raise SystemExit(f"scan returned {count} entries ending at {previous!r}, expected {expected}")
    return count / took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000, help="entries of the point-get store (10,000)")
    parser.add_argument("--requests", type=int, default=5000, help="timed gets per variant (5000)")
    parser.add_argument("--get-rounds", type=int, default=3, help="rounds the gets are split into (3)")
    parser.add_argument("--scan-entries", type=int, default=1_000_000, help="entries of the scan store (1,000,000)")
    parser.add_argument("--partitions", type=int, default=8, help="store partitions of both stores (8)")
    parser.add_argument("--scan-rounds", type=int, default=3, help="timed full scans (3)")
    parser.add_argument("--profile-scan", action="store_true", help="cProfile one scan and print the top functions")
    parser.add_argument("--skip-gets", action="store_true")
    parser.add_argument("--skip-scan", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the keyspace (a rerun skips loading)")
    args = parser.parse_args()

    config = resolve(CassandraConfig, overrides={"keyspace": KEYSPACE})
    session = session_for(config)
    create_keyspace(session, KEYSPACE)
    rows = []
    load_before = os.getloadavg()[0]
    try:
        if not args.skip_gets:
            load(session, "gets", args.keys, args.partitions)
            variants = {
                "no cache": (),
                "read cache": ("--cache-entries", str(args.keys), "--cache-ttl", "3600"),
            }
            pooled: dict[str, list[float]] = {label: [] for label in ["library get, no HTTP", *variants]}
            per_round = args.requests // args.get_rounds
            for round_ in range(args.get_rounds):  # variants alternate, so a noisy minute hits all of them
                pooled["library get, no HTTP"] += library_gets(session, "gets", args.keys, per_round, round_)
                for label, extra in variants.items():
                    process, url = serve(*extra)
                    try:
                        pooled[label] += point_gets(url, "gets", args.keys, per_round, seed=round_)
                    finally:
                        process.terminate()
                        process.wait(timeout=30)
            for label, latencies in pooled.items():
                what = label if label.startswith("library") else f"HTTP point get, {label}"
                rows.append(
                    f"| {what} | {len(latencies):,} sequential requests in {args.get_rounds} rounds"
                    f"{', keep-alive' if what.startswith('HTTP') else ''} | {summary(latencies)} | p99 < 5 ms |"
                )
        if not args.skip_scan:
            load(session, "scan", args.scan_entries, args.partitions)
            if args.profile_scan:
                profile = cProfile.Profile()
                profile.runcall(scan, session, "scan", args.scan_entries)
                pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(18)
            rates = [scan(session, "scan", args.scan_entries) for _ in range(args.scan_rounds)]
            rows.append(
                f"| full scan, library all() | {args.scan_entries:,} entries, {args.partitions} partitions, "
                f"{args.scan_rounds} rounds | best {max(rates):,.0f}/s, median {statistics.median(rates):,.0f}/s "
                f"| >= 100,000/s |"
            )
    finally:
        if not args.keep:
            session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", execution_profile=DDL_PROFILE, timeout=120)

    machine = platform.processor() or platform.machine()
    print(
        f"\nMachine: {machine}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"1-minute load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print("\n| measure | workload | result | target |\n|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
