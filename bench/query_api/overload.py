"""The query API under overload: goodput and latency of the served requests when more is offered
than one worker can serve.

`statestore serve --workers 1` over a partitioned store of --keys entries; the load generator is
a Go program (overload/main.go, built here with the machine's `go`), a process of its own that
offers point gets of random keys at a fixed rate whatever the server answers (an open loop),
measuring each request from the moment it was due. It shares the machine with the server and
Cassandra, so its CPU (recorded per run) is taken from theirs, the more so the more it offers.
In each of --rounds rounds: the capacity (--clients closed-loop clients for --seconds), then
offered rates of that capacity x each --factors, --seconds each. For each: served (200) per
second (goodput, against the round's capacity) and their p50/p99, shed (503) per second and
whether each had Retry-After, errors (anything else: a refused connection, a timeout).

    .venv/bin/python bench/query_api/overload.py             # make bench-overload
    .venv/bin/python bench/query_api/overload.py --seconds 5 --factors 1 2   # quick

Writes .stack/bench-results/overload/overload.json (bench/results/overload/ with
STATESTORE_BENCH_PUBLISH=1). Needs the local stack; works in keyspace bench_query (kept).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import bench_common
from query_api import KEYSPACE, load, serve

from statestore.conn.cassandra import create_keyspace, session_for
from statestore.core.config import CassandraConfig, resolve

GENERATOR = Path(__file__).with_name("overload")
STORE = "overload"


def build_generator() -> Path:
    binary = bench_common.PROJECT / ".stack" / "bench" / "overload"
    binary.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=GENERATOR, check=True, env=env, timeout=600)
    return binary


def offer(binary: Path, url: str, keys: int, seconds: float, rate: float = 0, clients: int = 0) -> dict:
    argv = [str(binary), "-url", url, "-store", STORE, "-keys", str(keys), "-seconds", str(seconds)]
    argv += ["-clients", str(clients)] if clients else ["-rate", f"{rate:.0f}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return json.loads(done.stdout) | {"generator_cpu_s": round(cpu, 2)}


def server_cpu_s(pid: int) -> float:
    return bench_common.process_tree_ticks(pid) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20_000, help="entries of the store (20,000)")
    parser.add_argument("--clients", type=int, default=32, help="closed-loop clients of the capacity run (32)")
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds per run (15)")
    parser.add_argument("--factors", type=float, nargs="+", default=[1, 1.5, 2, 4], help="x capacity (1 1.5 2 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds: a capacity run, then the rates (3)")
    parser.add_argument("--workers", type=int, default=1, help="server workers (1)")
    args = parser.parse_args()

    binary = build_generator()
    session = session_for(resolve(CassandraConfig, overrides={"keyspace": KEYSPACE}))
    create_keyspace(session, KEYSPACE)
    load(session, STORE, args.keys, 8)
    process, url = serve("--workers", str(args.workers))
    runs, capacities = [], []
    try:
        offer(binary, url, args.keys, 5, clients=args.clients)  # warm: every worker and connection
        for round_ in range(args.rounds):
            # Each round measures the capacity it is offered multiples of: it moves from round
            # to round with the machine (Cassandra's compactions, the other processes).
            cpu = server_cpu_s(process.pid)
            capacity = offer(binary, url, args.keys, args.seconds, clients=args.clients)
            capacity |= {"round": round_, "server_cpu_s": round(server_cpu_s(process.pid) - cpu, 2)}
            capacities.append(capacity)
            print(f"capacity: {capacity['served_per_s']:,.0f} req/s at {args.clients} clients", file=sys.stderr)
            for factor in args.factors:
                time.sleep(2)  # the last run's stragglers drained
                cpu = server_cpu_s(process.pid)
                run = offer(binary, url, args.keys, args.seconds, rate=capacity["served_per_s"] * factor)
                run |= {"factor": factor, "round": round_, "server_cpu_s": round(server_cpu_s(process.pid) - cpu, 2)}
                run["goodput_x_capacity"] = run["served_per_s"] / capacity["served_per_s"]
                runs.append(run)
                print(
                    f"x{factor}: offered {run['offered_per_s']:,.0f}/s, served {run['served_per_s']:,.0f}/s "
                    f"({run['goodput_x_capacity']:.2f}x capacity), p99 {run['served_p99_ms']:.1f} ms, "
                    f"statuses {run['by_status']}, errors {run['errors']}",
                    file=sys.stderr,
                )
    finally:
        process.terminate()
        process.wait(timeout=30)

    def median_by_factor(figure) -> dict[str, float]:
        return {str(f): statistics.median(figure(r) for r in runs if r["factor"] == f) for f in args.factors}

    by_factor = median_by_factor(lambda r: r["goodput_x_capacity"])
    generator_cpu = median_by_factor(lambda r: r["generator_cpu_s"] / r["seconds"])
    p99_by_factor = median_by_factor(lambda r: r["served_p99_ms"])
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": bench_common.machine_description(),
        "settings": vars(args) | {"load_average_1m": os.getloadavg()[0]},
        "capacities": capacities,
        "runs": runs,
        "summary": {
            "capacity_per_s": statistics.median(c["served_per_s"] for c in capacities),
            "goodput_x_capacity": by_factor,  # the median of the rounds, per factor
            "served_p99_ms": p99_by_factor,
            "generator_cores": generator_cpu,  # the load generator's CPU seconds per second
            "errors": sum(r["errors"] for r in runs),
            "shed_without_retry_after": sum(r["shed_without_retry_after"] for r in runs),
        },
    }
    out = bench_common.results_dir("overload")
    out.mkdir(parents=True, exist_ok=True)
    (out / "overload.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"written to {out / 'overload.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
