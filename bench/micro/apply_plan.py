"""What the key-value apply's cache and plan cost per key (BENCHMARKS.md, "Spark-side CPU"),
the way it was and the way it is, side by side in one run, without services: a bucket's LMDB file
(statestore.stream.apply_cache) holding the slice's keys from the previous batch, then

- before: the lookup makes an Entry per cached key, `advance` plans one key at a time, and
  the cache's records are made from the written entries;
- now: the lookup returns the raw records, statestore.stream.plan.plan_slice plans the slice
  as arrays and makes the records the cache keeps;

each in the hash order the rows arrive in from Spark and in key order (the order of the
LMDB file: the apply now sorts each Arrow batch by key), with Python's cyclic garbage collector
on and paused (statestore.stream.apply.collector_paused). Both ways give the same writes and
records (checked).

    .venv/bin/python bench/micro/apply_plan.py [--keys 140000] [--slice 20000] [--batches 4]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from bench_common import make_vocabulary

from statestore.core.model import Entry
from statestore.stream.apply import advance
from statestore.stream.apply_cache import BucketCache
from statestore.stream.plan import Delta, entry_of, plan_slice, record_of


def before(cache: BucketCache, deltas: list[Delta], batch_id: int) -> tuple[list[Entry], list]:
    """The slice as the apply did it: Entries from the cache, one key at a time."""
    keys = [d.key for d in deltas]
    stored, _ = cache.lookup(keys)
    current = {key: entry_of(key, record) for key, record in zip(keys, stored, strict=True) if record is not None}
    writes = []
    for delta in deltas:
        new = advance(current.get(delta.key), delta, batch_id)
        if new is not None:
            writes.append(Entry(delta.key, new[0], batch_id, new[1]))
    records = [(entry.key, record_of(entry)) for entry in writes]
    cache.remember(records)
    return writes, records


def now(cache: BucketCache, deltas: list[Delta], batch_id: int) -> tuple[list[Entry], list]:
    """The slice as the apply does it: records from the cache, planned as arrays."""
    stored, _ = cache.lookup([d.key for d in deltas])
    plan = plan_slice(stored, deltas, batch_id)
    cache.remember(plan.records)
    return plan.writes, plan.records


def per_key_micros(way, keys: list[bytes], slice_size: int, batches: int, collector: bool) -> float:
    """CPU µs per key of `way` over `batches` batches of every key (slices of `slice_size`) on
    a trusted file that the first batch filled: the median over the batches after it."""
    directory = tempfile.mkdtemp(prefix="apply-plan-")
    token, times = None, []
    for batch_id in range(batches + 1):
        cache = BucketCache(os.path.join(directory, "bucket"), token, fresh=batch_id == 0)
        enabled = gc.isenabled()
        if not collector:
            gc.disable()
        began = time.process_time()
        for start in range(0, len(keys), slice_size):
            deltas = [Delta(key, 1, 1_700_000_000_000 + batch_id) for key in keys[start : start + slice_size]]
            way(cache, deltas, batch_id)
        token = cache.finish()
        elapsed = time.process_time() - began
        if enabled:
            gc.enable()
        cache.close()
        if batch_id > 0:
            times.append(elapsed)
    return statistics.median(times) / len(keys) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=140_000, help="keys of the bucket (a task's share of a batch)")
    parser.add_argument("--slice", type=int, default=20_000, help="keys per slice (the apply's SLICE)")
    parser.add_argument("--batches", type=int, default=4)
    args = parser.parse_args()
    hashed = [word.encode() for word in make_vocabulary(args.keys, random.Random(15))]
    random.Random(16).shuffle(hashed)
    ordered = sorted(hashed)

    sample = [Delta(key, 2, 5) for key in hashed[:2000]]
    stored = [record_of(Entry(key, (7).to_bytes(8, "big"), 1, 3)) for key in hashed[:1000]] + [None] * 1000
    planned = plan_slice(stored, sample, 4)
    kept = {key: entry_of(key, record) for key, record in zip(hashed[:1000], stored[:1000], strict=True)}
    assert planned.writes == [
        Entry(d.key, new[0], 4, new[1]) for d in sample if (new := advance(kept.get(d.key), d, 4)) is not None
    ]

    print(f"{args.keys:,} keys in slices of {args.slice:,}; CPU µs per key, median of {args.batches} batches:")
    print(f"  {'order':6s} {'collector':10s} {'before':>8s} {'now':>8s}")
    for order, keys in (("hash", hashed), ("key", ordered)):
        for collector in (True, False):
            was, is_ = (per_key_micros(way, keys, args.slice, args.batches, collector) for way in (before, now))
            print(f"  {order:6s} {'on' if collector else 'paused':10s} {was:8.2f} {is_:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
