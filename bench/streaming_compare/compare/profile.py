"""Where our job's time goes: one more throughput run of the corpus, instrumented through
statestore's seams (statestore.stream.writer.BatchSeams), not by patching its modules.

  - the driver's steps per batch (lease check, registry progress, checkpoint offsets, dead
    letters, registry writes, the apply job), heard by BatchSeams.driver_timer;
  - cProfile of the driver's Python inside foreachBatch (Spark calls it on a py4j callback
    thread, so the driver timer switches the profiler on there when it hears the batch's
    first step, the lease check, and off when it hears the last, apply_batch);
  - Spark's own per-batch durations (progress events);
  - the executor-side apply in phases (read-before-write, plan, write): the library's
    partition_applier timed by an AccumulatorTimer (BatchSeams.task_timer), as
    bench/replay_overhead/ does.

The instrumented run is not one of the timed runs: the timers and accumulators cost a little.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import re
import threading
import time
from collections import Counter
from dataclasses import replace

from bench_common import StepClock, executor_timers

from compare import metrics

# The library's names of the driver's steps (BatchSeams.driver_timer) -> this report's labels.
DRIVER_LABELS = {
    "apply_batch": "apply_batch (all below + the apply job)",
    "dead letters": "dead letters (Spark jobs from the driver)",
    "first batch start offsets": "first batch start offsets (a Spark job)",
    "registry begin_batch": "registry begin_batch",
    "registry record_batch": "registry record_batch",
    "registry progress": "registry progress read",
    "checkpoint offsets": "checkpoint offsets",
    "lease check": "lease check",
}
EXECUTOR_PHASES = ("read", "plan", "write", "cache", "task", "slices")


class ForeachBatchClock(StepClock):
    """The driver timer of the profiled run: each step under its label, plus "foreachBatch
    (whole)" from the start of a batch's lease check to the end of its apply_batch, with
    cProfile on in between (on the thread that runs foreachBatch, where the timer is called)."""

    def __init__(self, profiler: cProfile.Profile) -> None:
        super().__init__(DRIVER_LABELS)
        self.profiler = profiler
        self._began: float | None = None

    def __call__(self, phase: str, seconds: float) -> None:
        now = time.perf_counter()
        super().__call__(phase, seconds)
        if phase == "lease check":  # the first step of BatchApplier.__call__
            self._began = now - seconds
            self.profiler.enable()
        elif phase == "apply_batch" and self._began is not None:  # its last
            self.profiler.disable()
            self.totals["foreachBatch (whole)"] += now - self._began
            self._began = None


def profiled_run(worker, index: metrics.RecordIndex) -> dict:
    accumulators, task_timer = executor_timers(worker.spark.sparkContext, EXECUTOR_PHASES)
    profiler = cProfile.Profile()
    clock = ForeachBatchClock(profiler)
    # The apply cache's hit rate: keys applied against keys read from Cassandra, every batch.
    applied = {"keys": 0, "read": 0}
    earlier = worker.seams.on_batch

    def count_reads(result) -> None:
        applied["keys"] += result.stats.keys
        applied["read"] += result.stats.read
        if earlier is not None:
            earlier(result)

    seams = replace(worker.seams, driver_timer=clock, task_timer=task_timer, on_batch=count_reads)
    name = f"pf_{worker.slug}"
    events, wall = worker.run_to_end(worker.plan["corpus_topic"], name, worker.workdir / name, seams)
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
        "driver_s": dict(clock.totals),
        "executor_s": {n: a.value for n, a in accumulators.items()},
        "keys_applied": applied["keys"],
        "keys_read": applied["read"],
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
    names["cache"] = "↳ apply cache (LMDB lookups and writes)"
    for key in ("task", "read", "plan", "write", "cache"):
        if key in executor:
            out.append(f"| {names[key]} | {executor[key]:.2f} |")
    if profile.get("keys_applied"):
        keys, read = profile["keys_applied"], profile["keys_read"]
        out += [
            "",
            f"Keys applied {keys:,}, read from Cassandra {read:,}: the apply cache vouched for"
            f" {1 - read / keys:.1%} of them.",
        ]
    if profile.get("restarted"):
        out += restarted_lines(label, profile["restarted"])
    out += ["", "cProfile of the driver inside foreachBatch, by cumulative time:", "", "```"]
    out += profile["cprofile_cumulative"].splitlines()[:40]
    out += ["```"]
    return out


def _words(value) -> str:
    return "–" if value is None else f"{value:,.0f}"


def restarted_run(worker, index: metrics.RecordIndex) -> dict:
    """The apply cache where it cannot start complete: the corpus into a fresh store, the query
    stopped after half its batches and started again from its checkpoint (a new driver: no
    cache is trusted, and the store is no longer empty, so every key the new run has not seen
    yet is read). The second half's throughput and hit rate; the final counts are checked."""
    name = f"rr_{worker.slug}"
    checkpoint = worker.workdir / name
    half = max(1, worker.plan.get("batches", 10) // 2)
    done = threading.Event()
    batches = 0

    def stop_half_way(result) -> None:
        nonlocal batches
        batches += 1
        if batches >= half:
            done.set()

    running = worker.start(
        worker.plan["corpus_topic"], name, checkpoint, "available-now", replace(worker.seams, on_batch=stop_half_way)
    )
    try:
        if not done.wait(timeout=worker.plan["run_timeout_s"]):
            raise RuntimeError(f"{worker.system}: {half} batches did not finish in time")
    finally:
        running.stop()
    applied = {"keys": 0, "read": 0}

    def count_reads(result) -> None:
        applied["keys"] += result.stats.keys
        applied["read"] += result.stats.read

    events, _ = worker.run_to_end(
        worker.plan["corpus_topic"], name, checkpoint, replace(worker.seams, on_batch=count_reads)
    )
    result = metrics.throughput(events, index)
    return {
        "first_half_batches": batches,
        "batches": result["batches"],
        "sustained_words_per_s": result.get("sustained_words_per_s"),
        "batch_s": result["batch_s"],
        "keys_applied": applied["keys"],
        "keys_read": applied["read"],
        "verified": worker.verify(name, events, index.records),
    }


def restarted_lines(label: str, run: dict) -> list[str]:
    keys, read = run["keys_applied"], run["keys_read"]
    return [
        "",
        f"Restarted half-way ({label}): after {run['first_half_batches']} batches into a fresh store the"
        f" query was stopped and started again from its checkpoint; its {run['batches']} batches applied"
        f" {keys:,} keys and read {read:,} from Cassandra (the cache vouched for {1 - read / max(keys, 1):.1%}),"
        f" {_words(run['sustained_words_per_s'])} words/s sustained; batch seconds"
        f" {', '.join(f'{b:.2f}' for b in run['batch_s'])}; {run['verified']}.",
    ]
