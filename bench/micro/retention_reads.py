"""What a store's retention at read costs a reader: the library's point get (sync and the HTTP
API's asynchronous one) and a full scan, timed on two partitioned-kv stores that differ only in
their retention (one with none: no registry read; one with 1 d: the stream time read once per get
or scan), on the local stack, in a keyspace of its own (dropped at the end).

    .venv/bin/python bench/micro/retention_reads.py [--gets 2000] [--entries 20000]

Writes retention_reads.json to bench_common.results_dir("retention_reads").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from bench_common import machine_description, results_dir, scratch_keyspace

from statestore.core.codecs import encode_long
from statestore.core.model import Entry
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.book.registry import BatchPosition
from statestore.store.builder import open_store
from statestore.store.tables import table_for

KEYSPACE = "bench_retention_reads"
NOW = 1_767_225_600_000
WARMUP = 100


def _store(session, name: str, retention_ms: int | None, entries: int):
    spec = admin.create_store(session, KEYSPACE, name, "partitioned-kv", 4, retention_ms=retention_ms)
    rows = [Entry(f"k{i:07d}".encode(), encode_long(i), 1, NOW - (i % 2) * 2 * 86_400_000) for i in range(entries)]
    table_for(spec).write_entries(session, rows, 64, None)
    registry.record_batch(session, spec, BatchPosition(batch_id=0, write_ts=1, start=None, end=None), NOW)
    return open_store(session, KEYSPACE, name)


def _get_ms(store, keys: list[str]) -> list[float]:
    took = []
    for key in keys:
        began = time.perf_counter()
        store.get(key)
        took.append((time.perf_counter() - began) * 1000)
    return took[WARMUP:]


def _get_async_ms(store, keys: list[str]) -> list[float]:
    store.prepare_point_get()

    async def run() -> list[float]:
        took = []
        for key in keys:
            began = time.perf_counter()
            await store.get_async(key)
            took.append((time.perf_counter() - began) * 1000)
        return took

    return asyncio.run(run())[WARMUP:]


def _scan_s(store) -> tuple[float, int]:
    began = time.perf_counter()
    seen = sum(1 for _ in store.all())
    return time.perf_counter() - began, seen


def _summary(took: list[float]) -> dict[str, float]:
    ordered = sorted(took)
    return {
        "median_ms": round(statistics.median(ordered), 3),
        "p99_ms": round(ordered[int(len(ordered) * 0.99)], 3),
        "mean_ms": round(statistics.mean(ordered), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gets", type=int, default=2000, help="point gets per store and kind (2000; 100 untimed)")
    parser.add_argument("--entries", type=int, default=20_000, help="entries per store (20000, half past retention)")
    args = parser.parse_args()
    results: dict[str, dict] = {}
    with scratch_keyspace(KEYSPACE) as (_config, session):
        stores = {
            "no_retention": _store(session, "plain", None, args.entries),
            "retention_1d": _store(session, "kept", 86_400_000, args.entries),
        }
        keys = [f"k{(i * 7919) % args.entries:07d}" for i in range(args.gets)]
        for label, store in stores.items():
            scan_s, seen = _scan_s(store)
            results[label] = {
                "get": _summary(_get_ms(store, keys)),
                "get_async": _summary(_get_async_ms(store, keys)),
                "scan_s": round(scan_s, 3),
                "scan_entries": seen,
            }
            print(label, json.dumps(results[label]))
        machine = machine_description(session=session)
    out = results_dir("retention_reads")
    out.mkdir(parents=True, exist_ok=True)
    report = {"gets": args.gets, "entries": args.entries, "machine": machine, "results": results}
    (out / "retention_reads.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"written: {out / 'retention_reads.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
