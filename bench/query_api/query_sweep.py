"""The query API under concurrent load: a sweep over the number of clients (query_api.py).

For each server variant, `statestore serve` runs as its own process tree and the load generator
(load_client.py, beside this module) as another, at each concurrency in turn; answered and shed
requests are reported apart (a shed request is a fast 503 with Retry-After, not a failure of the
server, but it did not get its value).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

LOAD_CLIENT = Path(__file__).with_name("load_client.py")


def measure(port: int, store: str, keys: int, clients: int, seconds: float, seed: int) -> dict:
    """One closed-loop run of the load generator in its own process."""
    argv = [sys.executable, str(LOAD_CLIENT), "--port", str(port), "--store", store, "--keys", str(keys)]
    argv += ["--clients", str(clients), "--seconds", str(seconds), "--seed", str(seed)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120, check=False)
    if done.returncode != 0:
        raise SystemExit(f"load generator failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else float("nan")


def row(variant: str, result: dict) -> str:
    ok, shed, wall = result["ok_ms"], result["shed_ms"], result["seconds"]
    served = f"{len(ok) / wall:,.0f} req/s, p50 {pct(ok, 50):.1f} ms, **p99 {pct(ok, 99):.1f} ms**" if ok else "none"
    shed_text = f"{len(shed) / wall:,.0f}/s, p99 {pct(shed, 99):.1f} ms, max {max(shed):.1f} ms" if shed else "0"
    errors = result["errors"]
    if errors:
        errors_text = f"{errors} ({'; '.join(result['error_samples'][:2])})"
    else:
        errors_text = "0"
    return f"| {variant} | {result['clients']} | {served} | {shed_text} | {errors_text} |"


HEADER = "| server | clients | answered (200) | shed (503) | errors |\n|---|---|---|---|---|"
