"""Interactive queries on the local stack: HTTP point gets and a full scan through the library.

(a) Point get through the HTTP API: `statestore serve` runs as its own process (no access log);
    one warm keep-alive connection sends --requests sequential GET /stores/{s}/keys/{k} for
    random keys of a --keys-entry partitioned store, after one untimed get of every key. Servers:
    the API as shipped without the read cache; the same app without its point-get fast path
    (every get through FastAPI's route: how it was before statestore.http.fast_get); and with
    the read cache (--cache-entries covering the keys, a TTL longer than the run, so after the
    warm-up every read is a hit: the floor the cache gives). Each server is measured with two
    clients: the standard library's http.client (little client CPU, like wrk or curl) and httpx
    (a full-featured client, with a CPU cost of its own per request). For reference, the same
    gets through the library with no HTTP. The variants alternate over --get-rounds rounds.
    Latency is client-side wall time per request (perf_counter).
(b) Full scan: a --scan-entries partitioned store (--partitions store partitions, written fast
    with table.write_entries), read end to end with the library's all() (every partition read
    concurrently, merged in key order, keys and values decoded). Entries/s over --scan-rounds
    rounds, best and median.
(c) Concurrency sweep (query_sweep.py): `statestore serve` with 1 and with 2 workers,
    and the API as it was before the work on load (one process, no shedding, a query per get,
    no gc.freeze), each with a closed-loop load generator in its own process (load_client.py)
    with 1, 8, 32 and 128 concurrent keep-alive clients, --sweep-seconds each; answered and
    shed requests reported apart.

    .venv/bin/python bench/query_api/query_api.py                  # 5000 gets x2, 1M-entry scan x3
    .venv/bin/python bench/query_api/query_api.py --scan-entries 200000 --requests 2000   # quick
    .venv/bin/python bench/query_api/query_api.py --keep           # keep the loaded stores for a rerun
    .venv/bin/python bench/query_api/query_api.py --profile-scan   # cProfile of one scan, top functions
    .venv/bin/python bench/query_api/query_api.py --skip-gets --skip-scan   # the concurrency sweep alone

Its parts sit beside it: query_sweep.py runs the sweep, load_client.py is the load generator.

Needs the local stack (scripts/stack up; STATESTORE_* for other ports). Works in its own
keyspace (bench_query), dropped at the end unless --keep.
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import json
import os
import platform
import pstats
import random
import socket
import statistics
import subprocess
import sys
import time

import httpx
import query_sweep

from statestore.conn.cassandra import DDL_PROFILE, create_keyspace, session_for
from statestore.core.codecs import encode_long
from statestore.core.config import CassandraConfig, resolve
from statestore.core.model import Entry
from statestore.store.builder import StoreBuilder, open_store

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


def serve(*args: str, fast_path: bool = True, before_load_work: bool = False) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    if before_load_work:
        argv = [sys.executable, __file__, "--serve-before-load-work", str(port)]
    elif fast_path:
        argv = [sys.executable, "-m", "statestore", "serve", "--port", str(port), "--keyspace", KEYSPACE]
        argv += ["--no-access-log", "--log-level", "warning", *args]
    else:
        argv = [sys.executable, __file__, "--serve-route-only", str(port)]
    process = subprocess.Popen(argv)
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


def serve_route_only(port: int) -> None:
    """The API without its point-get fast path: every get through FastAPI's route (the before)."""
    import uvicorn

    from statestore.http import create_app
    from statestore.http.fast_get import PointGetFastPath

    app = create_app(resolve(CassandraConfig, overrides={"keyspace": KEYSPACE}))
    app.user_middleware = [m for m in app.user_middleware if m.cls is not PointGetFastPath]
    uvicorn.run(app, host="127.0.0.1", port=port, access_log=False, log_level="warning")


def serve_before_load_work(port: int) -> None:
    """The API as it was before the work on load: one uvicorn process, no load shedding, one
    Cassandra query per point get, the garbage collector walking every object."""
    import uvicorn

    from statestore.http import create_app
    from statestore.http.fast_get import PointGetFastPath

    PointGetFastPath._read = lambda self, store, handle: handle.get_async  # no coalescing
    app = create_app(resolve(CassandraConfig, overrides={"keyspace": KEYSPACE}))
    uvicorn.run(app, host="127.0.0.1", port=port, access_log=False, log_level="warning")


class StdlibClient:
    """A keep-alive http.client connection: (status, body bytes) per GET."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.connection = http.client.HTTPConnection(host, int(port), timeout=30)

    def get(self, path: str) -> tuple[int, bytes]:
        self.connection.request("GET", path)
        response = self.connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.connection.close()


class HttpxClient:
    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=30)

    def get(self, path: str) -> tuple[int, bytes]:
        response = self.client.get(path)
        return response.status_code, response.content

    def close(self) -> None:
        self.client.close()


CLIENTS = {"http.client": StdlibClient, "httpx": HttpxClient}


def point_gets(url: str, store: str, keys: int, requests: int, seed: int, client_kind: str, warm: int) -> list[float]:
    """`warm` keys once, untimed (connection, prepared statements, store handle and, when on,
    the cache are warm after every key), then `requests` timed gets of random keys; their
    latencies in seconds."""
    rng = random.Random(seed)
    warmup = list(range(keys))
    rng.shuffle(warmup)
    warmup = warmup[:warm]
    order = [rng.randrange(keys) for _ in range(requests)]
    latencies = []
    client = CLIENTS[client_kind](url)
    try:
        for i in warmup:
            status, body = client.get(f"/stores/{store}/keys/{_key(i)}")
            if status != 200:
                raise SystemExit(f"warm-up get of {_key(i)} answered {status}: {body[:200]!r}")
        for i in order:
            started = time.perf_counter()
            status, body = client.get(f"/stores/{store}/keys/{_key(i)}")
            latencies.append(time.perf_counter() - started)
            if status != 200 or json.loads(body)["value"] != i:
                raise SystemExit(f"wrong answer for {_key(i)}: {status} {body[:200]!r}")
    finally:
        client.close()
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
    parser.add_argument(
        "--clients", nargs="+", choices=sorted(CLIENTS), default=["http.client", "httpx"], help="HTTP clients"
    )
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--sweep-seconds", type=float, default=10.0, help="timed seconds per sweep point (10)")
    parser.add_argument(
        "--sweep-clients", type=int, nargs="+", default=[1, 8, 32, 128], help="concurrencies (1 8 32 128)"
    )
    parser.add_argument("--sweep-workers", type=int, nargs="+", default=[1, 2], help="server workers (1 2)")
    parser.add_argument("--serve-route-only", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--serve-before-load-work", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_before_load_work:
        serve_before_load_work(args.serve_before_load_work)
        return 0
    if args.serve_route_only:
        serve_route_only(args.serve_route_only)
        return 0

    config = resolve(CassandraConfig, overrides={"keyspace": KEYSPACE})
    session = session_for(config)
    create_keyspace(session, KEYSPACE)
    rows: list[str] = []
    sweep_rows: list[str] = []
    load_before = os.getloadavg()[0]
    try:
        if not args.skip_gets:
            load(session, "gets", args.keys, args.partitions)
            servers = {  # label: (serve arguments, with the fast path)
                "no cache (as shipped)": ((), True),
                "no cache, without the fast path (FastAPI's route, a worker thread per get)": ((), False),
                "read cache": (("--cache-entries", str(args.keys), "--cache-ttl", "3600"), True),
            }
            variants = [(server, kind) for server in servers for kind in args.clients]
            pooled: dict[str, list[float]] = {"library get, no HTTP": []}
            pooled |= {f"HTTP point get, {server}, {kind} client": [] for server, kind in variants}
            per_round = args.requests // args.get_rounds
            for round_ in range(args.get_rounds):  # variants alternate, so a noisy minute hits all of them
                pooled["library get, no HTTP"] += library_gets(session, "gets", args.keys, per_round, round_)
                for server, (extra, fast_path) in servers.items():
                    process, url = serve(*extra, fast_path=fast_path)
                    try:
                        for n, kind in enumerate(args.clients):  # the first client warms every key
                            warm = args.keys if n == 0 else 100
                            latencies = point_gets(url, "gets", args.keys, per_round, round_, kind, warm)
                            pooled[f"HTTP point get, {server}, {kind} client"] += latencies
                    finally:
                        process.terminate()
                        process.wait(timeout=30)
            for what, latencies in pooled.items():
                rows.append(
                    f"| {what} | {len(latencies):,} sequential requests in {args.get_rounds} rounds"
                    f"{', keep-alive' if what.startswith('HTTP') else ''} | {summary(latencies)} | p99 < 5 ms |"
                )
        if not args.skip_sweep:
            load(session, "gets", args.keys, args.partitions)
            servers = {f"{n} worker(s), as shipped": {"args": ("--workers", str(n))} for n in args.sweep_workers}
            servers["before the load work (1 process, no shedding, a query per get)"] = {"before_load_work": True}
            for label, how in servers.items():
                process, url = serve(*how.get("args", ()), before_load_work=how.get("before_load_work", False))
                try:
                    port = int(url.rsplit(":", 1)[1])
                    for clients in args.sweep_clients:
                        result = query_sweep.measure(port, "gets", args.keys, clients, args.sweep_seconds, clients)
                        sweep_rows.append(query_sweep.row(label, result))
                        print(sweep_rows[-1], file=sys.stderr)
                finally:
                    process.terminate()
                    process.wait(timeout=60)
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
    if sweep_rows:
        print(f"\nConcurrency sweep, {args.keys:,}-key store, {args.sweep_seconds:.0f} s per point:\n")
        print(query_sweep.HEADER)
        print("\n".join(sweep_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
