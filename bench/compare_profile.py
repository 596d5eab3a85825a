"""Where our job's time goes: one more throughput run of the corpus, instrumented.

  - cProfile of the driver's Python inside foreachBatch (Spark calls it on a py4j callback
    thread, so the profiler is switched on around each call there);
  - the driver's steps per batch (lease check, checkpoint offsets, dead letters, registry
    writes, the apply job), timed by wrapping them;
  - Spark's own per-batch durations (progress events);
  - the executor-side apply in phases (read-before-write, plan, write) with accumulators,
    as bench/replay_overhead.py does.

The instrumented run is not one of the timed runs: the wrappers and accumulators cost a little.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import re
import time
from collections import Counter

from bench import compare_metrics as metrics
from bench.common import profiled_partition_applier


def _driver_steps():
    from statestore import batches, checkpoint, lease, registry

    return [
        (batches, "apply_batch", "apply_batch (all below + the apply job)"),
        (batches, "write_dead_letters", "dead letters (Spark jobs from the driver)"),
        (batches, "first_batch_start", "first batch start offsets (a Spark job)"),
        (registry, "begin_batch", "registry begin_batch"),
        (registry, "record_batch", "registry record_batch"),
        (registry, "progress", "registry progress read"),
        (checkpoint, "batch_end_offsets", "checkpoint offsets"),
        (lease.StoreLease, "check", "lease check"),
    ]


def profiled_run(worker, index: metrics.RecordIndex) -> dict:
    from statestore import batches

    sc = worker.spark.sparkContext
    timers = {n: sc.accumulator(0.0) for n in ("read", "plan", "write", "task", "slices")}
    driver: Counter = Counter()
    profiler = cProfile.Profile()
    undo = []

    def timed(label, function):
        def wrapper(*args, **kwargs):
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                driver[label] += time.perf_counter() - began

        return wrapper

    for owner, attribute, label in _driver_steps():
        original = getattr(owner, attribute)
        undo.append((owner, attribute, original))
        setattr(owner, attribute, timed(label, original))
    undo.append((batches, "partition_applier", batches.partition_applier))
    batches.partition_applier = profiled_partition_applier(timers)
    original_call = batches.BatchApplier.__call__
    undo.append((batches.BatchApplier, "__call__", original_call))

    def profiled_call(self, batch_df, batch_id):
        began = time.perf_counter()
        profiler.enable()
        try:
            return original_call(self, batch_df, batch_id)
        finally:
            profiler.disable()
            driver["foreachBatch (whole)"] += time.perf_counter() - began

    batches.BatchApplier.__call__ = profiled_call
    name = f"pf_{worker.system}"
    try:
        events, wall = worker.run_to_end(worker.plan["corpus_topic"], name, worker.workdir / name)
    finally:
        for owner, attribute, original in reversed(undo):
            setattr(owner, attribute, original)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(30)
    own = io.StringIO()
    pstats.Stats(profiler, stream=own).sort_stats("tottime").print_stats(20)
    result = metrics.throughput(events, index)
    per_batch = [
        {k: v / 1000 for k, v in e["durationMs"].items()} | {"batchId": e["batchId"], "rows": e["numInputRows"]}
        for e in metrics.data_batches(events)
    ]
    return {
        "wall_s": wall,
        "sustained_words_per_s": result.get("sustained_words_per_s"),
        "driver_s": dict(driver),
        "executor_s": {n: a.value for n, a in timers.items()},
        "spark_batches": per_batch,
        "cprofile_cumulative": _trim(text.getvalue()),
        "cprofile_own_time": _trim(own.getvalue()),
        "events": json.loads(json.dumps(events[-1:])),
    }


def _trim(report: str) -> str:
    """pstats output without blank lines, file paths shortened to the package."""
    lines = (line for line in report.splitlines() if line.strip())
    return "\n".join(re.sub(r"/\S*/(site-packages|lib/python3\.\d+|main)/", "", line) for line in lines)


def profile_lines(label: str, profile: dict) -> list[str]:
    """Markdown: where one instrumented run of our job spent its time."""
    driver, executor = profile["driver_s"], profile["executor_s"]
    spark: Counter = Counter()
    for batch in profile["spark_batches"]:
        spark.update({k: v for k, v in batch.items() if k not in ("batchId", "rows")})
    out = [
        f"### Profile: {label} ({profile['wall_s']:.1f} s wall, {len(profile['spark_batches'])} batches,"
        f" {_words(profile.get('sustained_words_per_s'))} words/s while instrumented)",
        "",
        "| where | seconds, summed over batches |",
        "|---|---:|",
    ]
    for key in (
        "triggerExecution",
        "latestOffset",
        "queryPlanning",
        "getBatch",
        "addBatch",
        "walCommit",
        "commitOffsets",
    ):
        if spark.get(key):
            out.append(f"| Spark {key} | {spark[key]:.2f} |")
    for label_, seconds in sorted(driver.items(), key=lambda kv: -kv[1]):
        out.append(f"| driver: {label_} | {seconds:.2f} |")
    names = {"task": "executor apply tasks (sum over tasks)", "read": "↳ read-before-write", "plan": "↳ plan_writes"}
    names["write"] = "↳ write_entries"
    for key in ("task", "read", "plan", "write"):
        if key in executor:
            out.append(f"| {names[key]} | {executor[key]:.2f} |")
    out += ["", "cProfile of the driver inside foreachBatch, by cumulative time:", "", "```"]
    out += profile["cprofile_cumulative"].splitlines()[:40]
    out += ["```"]
    return out


def _words(value) -> str:
    return "–" if value is None else f"{value:,.0f}"
