"""What the replay-safety machinery costs: the word count with and without it, side by side.

One run of this script generates one input (a fixed seed, a Zipf-like vocabulary), produces
it to one Kafka topic, and streams it several times, each into a fresh store with a fresh
checkpoint, in ONE SparkSession (so Spark's start-up is paid once, outside every timing):

  replay-safe   the real job (statestore.wordcount.start): read the current rows, skip the
                ones this batch already wrote, write absolute values USING TIMESTAMP;
                partitioned-kv store.
  counter       the same job without replay safety: same Kafka read, same tokenization and
                aggregation (batch_deltas), same foreachBatch (lease check, registry
                bookkeeping, dead letters), but the executor-side apply is swapped for blind
                counter increments (UPDATE ... SET value = value + ?) on a counter table of the
                same layout (PRIMARY KEY ((partition), key)), grouped per partition into
                batches exactly as the store groups its writes, with the same concurrency.
                Done by replacing statestore.batches.partition_applier for the run.
  global        (optional) the real job on a global-kv store.

The variants run in alternating order (AB, BA, ...) for --rounds rounds after an untimed
warm-up run of each on the same input; the report gives each variant's median, the ratio of the medians and the
median of each round's ratio (the two runs of a round are neighbours in time). Throughput is
words of input / wall time from start() (the store is provisioned beforehand) until the
available-now query terminates; the sum of Spark's `durationMs.triggerExecution` over the
batches is reported too. Every run's final counts are compared with the ground truth, so a
broken run cannot pass for a fast one. The CPU time of the Spark process tree (JVM and Python
workers, plus this driver) and of Cassandra is sampled around every run.

After the timed rounds, one profiled run of each apply (not part of the medians) times the
driver's steps of each batch and the phases of the executor-side apply (read-before-write,
planning, writes; with accumulators).

The stack may be shared: the script waits for Cassandra and Kafka to answer before each run,
recreates its keyspace or topic if someone reset them, and repeats a run that failed (a
timed-out counter write cannot be retried in place: increments are not idempotent).

    .venv/bin/python bench/replay_overhead.py            # defaults: 1M words, 4 rounds, 5-6 min
    .venv/bin/python bench/replay_overhead.py --words 200000 --rounds 2 --no-profile   # quick
    .venv/bin/python bench/replay_overhead.py --variants replay-safe,counter,global --rounds 1

Needs the local stack (scripts/stack up). Cleans up its keyspace and topics at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from bench.common import (  # noqa: E402
    cassandra_pid,
    cpu_ticks_of,
    delete_topics,
    drop_keyspace,
    generate,
    machine_description,
    machine_ticks,
    process_tree_ticks,
    profiled_partition_applier,
    wait_for_stack,
    zipf_rank_of,
)
from statestore import batches, kafka_io  # noqa: E402
from statestore import config as cfg  # noqa: E402
from statestore.cassandra import DDL_PROFILE, close_all, create_keyspace, session_for  # noqa: E402
from statestore.config import CassandraConfig, KafkaConfig, StreamConfig  # noqa: E402
from statestore.provision import provision_store  # noqa: E402
from statestore.stores import StoreSpec, StoreType  # noqa: E402
from statestore.wordcount import JobConfig, start  # noqa: E402

_log = logging.getLogger("bench.replay_overhead")

VARIANTS = ("replay-safe", "counter", "global", "counter-global")
# (replay-safe variant, its baseline): the same store layout with and without replay safety.
PAIRS = (("replay-safe", "counter"), ("global", "counter-global"))
_GLOBAL_LAYOUT = ("global", "counter-global")
_SHORT = {"replay-safe": "r", "counter": "c", "global": "g", "counter-global": "cg"}


# --------------------------------------------------------------------------- the baseline


def counter_table(store: str) -> str:
    return f"{store}_counts"


def counter_table_cql(keyspace: str, store: str, global_layout: bool) -> str:
    """A counter table with the store's layout, ((partition), key) or key alone (global-kv),
    and the store's compaction strategy."""
    from statestore.options import DEFAULT_COMPACTION

    if global_layout:
        columns = "key blob PRIMARY KEY, value counter"
    else:
        columns = "partition int, key blob, value counter, PRIMARY KEY ((partition), key)"
    return (
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{counter_table(store)} ({columns})"
        f" WITH compaction = {{'class': '{DEFAULT_COMPACTION}'}}"
    )


def make_counter_applier(timers=None):
    """A drop-in for statestore.apply.partition_applier (same signature, same output: one
    ApplyStats per task) that applies the deltas as blind counter increments: no read, no batch
    tag, no write timestamp. Rows are decoded, sliced and grouped per partition exactly as the
    real apply does, and sent with the same concurrency in COUNTER batches of the store's size
    (for a global-kv store, whose writes are one statement per key: one update per key).
    With `timers` (a dict of Spark accumulators) it also times its phases."""

    def counter_partition_applier(config, spec, batch_id, write_ts):
        table = f"{spec.keyspace}.{counter_table(spec.name)}"
        partitions = spec.partitions
        concurrency = config.write_concurrency
        global_layout = spec.store_type.value == "global-kv"

        def apply_slice(session, update, deltas):
            from collections import defaultdict

            from cassandra.concurrent import execute_concurrent
            from cassandra.query import BatchStatement, BatchType

            from statestore.apply import ApplyStats
            from statestore.partitioner import partition_for
            from statestore.stores.partitioned_kv import _BATCH_BYTES, _BATCH_ROWS

            if not deltas:
                return ApplyStats()
            began = time.perf_counter()
            groups: dict[int, list] = defaultdict(list)
            statements = []
            if global_layout:  # every key is its own partition: one statement per key
                statements = [(update, (d.amount, d.key)) for d in deltas]
            else:
                for d in deltas:
                    groups[partition_for(d.key, partitions)].append(d)
            for partition, group in groups.items():
                batch, rows, size = None, 0, 0
                for d in group:
                    if batch is None or size >= _BATCH_BYTES or rows >= _BATCH_ROWS:
                        batch = BatchStatement(batch_type=BatchType.COUNTER)
                        statements.append((batch, ()))
                        rows, size = 0, 0
                    batch.add(update, (d.amount, partition, d.key))
                    rows += 1
                    size += len(d.key) + 8 + 24
            built = time.perf_counter()
            execute_concurrent(session, statements, concurrency=concurrency, raise_on_first_error=True)
            if timers is not None:
                timers["group"].add(built - began)
                timers["write"].add(time.perf_counter() - built)
                timers["slices"].add(1)
            times = [d.time_ms for d in deltas if d.time_ms is not None]
            return ApplyStats(len(deltas), len(deltas), 0, max(times) if times else None)

        def apply_partition(rows):
            from statestore.apply import _SLICE, ApplyStats, Delta
            from statestore.cassandra import prepare, session_for

            task_began = time.perf_counter()
            session = session_for(config)
            where = "key = ?" if global_layout else "partition = ? AND key = ?"
            update = prepare(session, f"UPDATE {table} SET value = value + ? WHERE {where}")
            total = ApplyStats()
            deltas = []
            for row in rows:
                deltas.append(Delta(row[0].encode("utf-8"), int(row[1]), row[2]))
                if len(deltas) >= _SLICE:
                    total += apply_slice(session, update, deltas)
                    deltas = []
            total += apply_slice(session, update, deltas)
            if timers is not None:
                timers["task"].add(time.perf_counter() - task_began)
            yield total

        return apply_partition

    return counter_partition_applier


def count_first(write_dead_letters):
    """An experiment (--dead-letters count-first), for a while the job's own behaviour, since
    superseded (the apply job counts what it cannot count, and a clean batch runs no
    dead-letter job at all; with this wrapper it runs one count): skip the streaming
    of dead letters when one counting job finds none. statestore.batches.write_dead_letters
    streams them with toLocalIterator(), which runs one Spark job per partition of
    dead_letter_rows (a union of two branches over every Kafka partition) for every batch,
    even though the set is almost always empty."""

    def write_if_any(session, batch_df, spec, batch_id):
        from statestore.wordcount import dead_letter_rows

        if dead_letter_rows(batch_df).count() == 0:
            return 0
        return write_dead_letters(session, batch_df, spec, batch_id)

    return write_if_any


# --------------------------------------------------------------------------- measuring


@dataclass
class RunResult:
    variant: str
    round: int
    store: str
    wall_s: float
    trigger_s: float
    batches: int
    input_rows: int
    words: int
    keys_per_batch: list[int]
    cassandra_cpu_s: float
    machine_busy_s: float
    spark_cpu_s: float
    load_before: float
    verified: bool
    timers: dict[str, float] = field(default_factory=dict)
    spark_durations: dict[str, float] = field(default_factory=dict)
    driver: dict[str, float] = field(default_factory=dict)

    @property
    def words_per_s(self) -> float:
        return self.words / self.wall_s

    @property
    def words_per_trigger_s(self) -> float:
        return self.words / self.trigger_s


class CountMismatchError(AssertionError):
    """A run's final counts differ from the ground truth."""


class Bench:
    def __init__(self, args, spark, cassandra: CassandraConfig, kafka: KafkaConfig, workdir: Path) -> None:
        self.args = args
        self.spark = spark
        self.cassandra = cassandra
        self.kafka = kafka
        self.session = session_for(cassandra)
        self.workdir = workdir
        self.cassandra_pid = cassandra_pid()
        try:
            self.spark_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        except Exception:  # noqa: BLE001 - the CPU sample is optional
            self.spark_pid = None
        self.hz = os.sysconf("SC_CLK_TCK")
        self._batch_keys: list[int] = []
        self.failed_attempts: list[str] = []
        self.inputs: dict[str, list[bytes]] = {}
        self.produced: set[str] = set()
        self._real_apply_batch = batches.apply_batch
        self._real_partition_applier = batches.partition_applier

    def ready(self, topic: str) -> None:
        """The stack answers, and the keyspace and the topic are still there (another user of
        the shared stack may have restarted or reset it): recreate them if not."""
        wait_for_stack(self.cassandra, self.kafka, self.args.stack_wait)
        create_keyspace(self.session, self.cassandra.keyspace)
        if kafka_io.partition_count(self.kafka, topic) is None:
            if topic in self.produced:
                _log.warning("topic %s is gone: producing it again", topic)
            began = time.perf_counter()
            kafka_io.ensure_topic(self.kafka, topic, self.args.partitions)
            kafka_io.produce(self.kafka, topic, self.inputs[topic])
            self.produced.add(topic)
            _log.info("produced %d lines to %s (%.1fs)", len(self.inputs[topic]), topic, time.perf_counter() - began)

    def _timed(self, name: str, function):
        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._driver[name] += time.perf_counter() - began

        return timed

    def _patch_driver_timers(self) -> list:
        """Time the driver's steps of each batch (restored after the run)."""
        from statestore import checkpoint, lease, registry

        targets = [
            (batches, "write_dead_letters", "dead letters (driver job)"),
            (batches, "first_batch_start", "first batch start offsets (driver job)"),
            (registry, "begin_batch", "registry begin_batch"),
            (registry, "record_batch", "registry record_batch"),
            (checkpoint, "batch_end_offsets", "checkpoint offsets"),
            (lease.StoreLease, "check", "lease check"),
        ]
        undo = []
        for owner, attribute, label in targets:
            original = getattr(owner, attribute)
            undo.append((owner, attribute, original))
            setattr(owner, attribute, self._timed(label, original))
        return undo

    def _recording_apply_batch(self, *args, **kwargs):
        result = self._real_apply_batch(*args, **kwargs)
        self._batch_keys.append(result.stats.keys)
        return result

    def run(self, variant: str, round_no: int, topic: str, truth: Counter, max_offsets: int, profile=False):
        """One run in a fresh store and checkpoint. A run that fails (the counter baseline
        cannot retry a timed-out write: increments are not idempotent) is repeated from
        scratch, up to --attempts times; a wrong count is never retried."""
        for attempt in range(1, self.args.attempts + 1):
            try:
                self.ready(topic)
                return self._run(variant, round_no, topic, truth, max_offsets, profile)
            except CountMismatchError:
                raise
            except Exception as exc:
                first_line = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
                if attempt == self.args.attempts:
                    raise
                _log.warning(
                    "%s round %d failed (attempt %d): %s; running it again", variant, round_no, attempt, first_line
                )
                self.failed_attempts.append(f"{variant} round {round_no}: {first_line}")
        raise AssertionError("unreachable")

    def _run(self, variant: str, round_no: int, topic: str, truth: Counter, max_offsets: int, profile: bool):
        store = f"b{_SHORT[variant]}{round_no}_{uuid.uuid4().hex[:8]}"
        global_layout = variant in _GLOBAL_LAYOUT
        store_type = StoreType.GLOBAL_KV if global_layout else StoreType.PARTITIONED_KV
        spec = provision_store(
            self.session, StoreSpec(self.cassandra.keyspace, store, store_type, self.args.partitions), topic
        )
        timers = None
        if profile:
            sc = self.spark.sparkContext
            names = ("read", "plan", "write", "group", "task", "slices")
            timers = {n: sc.accumulator(0.0) for n in names}
        if variant.startswith("counter"):
            self.session.execute(counter_table_cql(spec.keyspace, store, global_layout), execution_profile=DDL_PROFILE)
            batches.partition_applier = make_counter_applier(timers)
        elif profile:
            batches.partition_applier = profiled_partition_applier(timers)
        stream = StreamConfig(
            topic=topic,
            store=store,
            checkpoint=str(self.workdir / store),
            max_offsets_per_trigger=max_offsets,
        )
        self._batch_keys = []
        self._driver = Counter()
        batches.apply_batch = self._timed("apply_batch", self._recording_apply_batch)
        undo = []
        if self.args.dead_letters == "count-first":
            undo.append((batches, "write_dead_letters", batches.write_dead_letters))
            batches.write_dead_letters = count_first(batches.write_dead_letters)
        if profile:
            undo += self._patch_driver_timers()
        cassandra_before = cpu_ticks_of(self.cassandra_pid)
        spark_before = process_tree_ticks(self.spark_pid)
        driver_before = sum(os.times()[:2])
        busy_before, _ = machine_ticks()
        load = os.getloadavg()[0]
        began = time.perf_counter()
        try:
            running = start(self.spark, JobConfig(stream, self.cassandra, self.kafka))
            try:
                finished = running.query.awaitTermination(timeout=self.args.run_timeout)
                wall = time.perf_counter() - began
                if not finished:
                    raise RuntimeError(f"{variant} run did not finish within {self.args.run_timeout} s")
                progress = running.query.recentProgress
            finally:
                running.stop()
        finally:
            batches.apply_batch = self._real_apply_batch
            batches.partition_applier = self._real_partition_applier
            for owner, name, original in reversed(undo):
                setattr(owner, name, original)
        cassandra_cpu = (cpu_ticks_of(self.cassandra_pid) - cassandra_before) / self.hz
        machine_busy = (machine_ticks()[0] - busy_before) / self.hz
        spark_cpu = (process_tree_ticks(self.spark_pid) - spark_before) / self.hz
        spark_cpu += sum(os.times()[:2]) - driver_before
        data_batches = [p for p in progress if p["numInputRows"] > 0]
        trigger = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
        spark_parts = Counter()
        for p in progress:
            spark_parts.update({k: v / 1000 for k, v in p["durationMs"].items()})
        counts = self.read_counts(spec, variant)
        verified = counts == dict(truth)
        if not verified:
            missing = len(set(truth) - set(counts))
            wrong = sum(1 for k, v in counts.items() if truth.get(k) != v)
            raise CountMismatchError(
                f"{variant} round {round_no} (store {store}): counts differ from the ground truth "
                f"({missing} words missing, {wrong} with a wrong count, {len(counts)} stored vs {len(truth)})"
            )
        result = RunResult(
            variant=variant,
            round=round_no,
            store=store,
            wall_s=wall,
            trigger_s=trigger,
            batches=len(data_batches),
            input_rows=sum(p["numInputRows"] for p in progress),
            words=sum(truth.values()),
            keys_per_batch=list(self._batch_keys),
            cassandra_cpu_s=cassandra_cpu,
            machine_busy_s=machine_busy,
            spark_cpu_s=spark_cpu,
            load_before=load,
            verified=verified,
            timers={n: a.value for n, a in timers.items()} if timers else {},
            spark_durations=dict(spark_parts),
            driver=dict(self._driver),
        )
        _log.info(
            "%-11s round %d: %6.1fs wall, %6.1fs in batches, %d batches, %7.0f words/s, cpu: spark %.1fs, "
            "cassandra %.1fs, machine %.1fs; load before %.1f; counts verified",
            variant,
            round_no,
            wall,
            trigger,
            result.batches,
            result.words_per_s,
            spark_cpu,
            cassandra_cpu,
            machine_busy,
            load,
        )
        return result

    def read_counts(self, spec: StoreSpec, variant: str) -> dict[str, int]:
        from statestore.codecs import decode_long

        if variant.startswith("counter"):
            select = f"SELECT key, value FROM {spec.keyspace}.{counter_table(spec.name)}"
            decode = int
        else:
            select = f"SELECT key, value FROM {spec.keyspace}.{spec.table}"
            decode = decode_long
        from cassandra.query import SimpleStatement

        statement = SimpleStatement(select, fetch_size=5000)
        return {bytes(r.key).decode("utf-8"): decode(r.value) for r in self.session.execute(statement)}


# --------------------------------------------------------------------------- report


def summarize(results: list[RunResult], variants: list[str]) -> dict[str, dict]:
    summary = {}
    for v in variants:
        runs = [r for r in results if r.variant == v]
        summary[v] = {
            "runs": len(runs),
            "words_per_s": [round(r.words_per_s) for r in runs],
            "median_words_per_s": statistics.median(r.words_per_s for r in runs),
            "median_wall_s": statistics.median(r.wall_s for r in runs),
            "median_trigger_s": statistics.median(r.trigger_s for r in runs),
            "median_words_per_trigger_s": statistics.median(r.words_per_trigger_s for r in runs),
            "median_spark_cpu_s": statistics.median(r.spark_cpu_s for r in runs),
            "median_cassandra_cpu_s": statistics.median(r.cassandra_cpu_s for r in runs),
            "median_machine_busy_s": statistics.median(r.machine_busy_s for r in runs),
            "load_before": [round(r.load_before, 1) for r in runs],
        }
    ratios = {}
    for safe, base in PAIRS:
        if safe not in summary or base not in summary:
            continue
        # The runs of a round are neighbours in time: their ratio sees the same background.
        rounds: dict[int, dict[str, RunResult]] = {}
        for r in results:
            rounds.setdefault(r.round, {})[r.variant] = r
        per_round = [p[safe].words_per_s / p[base].words_per_s for p in rounds.values() if safe in p and base in p]
        a, b = summary[safe], summary[base]
        ratios[f"{safe}/{base}"] = {
            "of_medians": a["median_words_per_s"] / b["median_words_per_s"],
            "of_medians_trigger": a["median_words_per_trigger_s"] / b["median_words_per_trigger_s"],
            "per_round": per_round,
            "median_per_round": statistics.median(per_round),
            "cpu_per_word": (a["median_spark_cpu_s"] + a["median_cassandra_cpu_s"])
            / (b["median_spark_cpu_s"] + b["median_cassandra_cpu_s"]),
        }
    if ratios:
        summary["ratios"] = ratios
    return summary


def markdown(summary: dict, profiles: dict, budget: float) -> str:
    out = [
        "| variant | words/s (median) | each run, words/s | wall s | in batches s | CPU s: Spark | CPU s: Cassandra "
        "| machine busy s | load avg before each run |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for v, s in summary.items():
        if v == "ratios":
            continue
        out.append(
            f"| {v} | {s['median_words_per_s']:,.0f} | {', '.join(f'{x:,}' for x in s['words_per_s'])} "
            f"| {s['median_wall_s']:.1f} | {s['median_trigger_s']:.1f} | {s['median_spark_cpu_s']:.1f} "
            f"| {s['median_cassandra_cpu_s']:.1f} | {s['median_machine_busy_s']:.1f} "
            f"| {', '.join(str(x) for x in s['load_before'])} |"
        )
    for pair, ratio in summary.get("ratios", {}).items():
        overhead = 1 - ratio["of_medians"]
        worst = max(overhead, 1 - ratio["median_per_round"])
        verdict = "MET" if worst <= budget else f"MISSED by {worst - budget:.1%} points"
        out.append("")
        out.append(
            f"{pair} throughput: **{ratio['of_medians']:.3f}** (medians of wall-time throughput); "
            f"per round {', '.join(f'{x:.3f}' for x in ratio['per_round'])} (median {ratio['median_per_round']:.3f}); "
            f"{ratio['of_medians_trigger']:.3f} by the sum of triggerExecution; CPU (Spark + Cassandra) per word "
            f"{ratio['cpu_per_word']:.3f}x the baseline's."
        )
        out.append(
            f"overhead {overhead:+.1%} (ratio of medians), {1 - ratio['median_per_round']:+.1%} (median of the "
            f"rounds' ratios), against a budget of {budget:.0%}: **{verdict}**"
        )
    for variant, prof in profiles.items():
        out.append("")
        out.extend(profile_lines(variant, prof))
    return "\n".join(out)


def profile_lines(variant: str, prof: RunResult) -> list[str]:
    """Where the wall time of one profiled run went: Spark's trigger phases, the driver's
    steps inside foreachBatch, and the executor-side apply's phases."""
    d, t, sp = prof.driver, prof.timers, prof.spark_durations
    out = [
        f"profile of one {variant} run: {prof.wall_s:.1f}s wall, {prof.words_per_s:,.0f} words/s, "
        f"{prof.batches} batches, Cassandra CPU {prof.cassandra_cpu_s:.1f}s, machine busy {prof.machine_busy_s:.1f}s "
        f"(of {2 * prof.wall_s:.1f} core-seconds on 2 cores)"
    ]
    out.append(f"  - Spark triggerExecution, summed over batches: {sp.get('triggerExecution', 0):.1f}s")
    for part in ("latestOffset", "queryPlanning", "getBatch", "walCommit", "commitOffsets"):
        if sp.get(part):
            out.append(f"    - {part}: {sp[part]:.2f}s")
    out.append(f"    - addBatch (our foreachBatch): {sp.get('addBatch', 0):.1f}s")
    named = ("lease check", "checkpoint offsets", "first batch start offsets (driver job)")
    for label in named:
        if label in d:
            out.append(f"      - {label}: {d[label]:.2f}s")
    apply = d.get("apply_batch", 0.0)
    out.append(f"      - apply_batch: {apply:.1f}s")
    inner = ("registry begin_batch", "dead letters (driver job)", "registry record_batch")
    for label in inner:
        if label in d:
            out.append(f"        - {label}: {d[label]:.2f}s")
    job = apply - sum(d.get(label, 0.0) for label in inner)
    out.append(f"        - the apply job (Kafka read, tokenize, aggregate, shuffle, apply): {job:.1f}s")
    task = t.get("task", 0.0)
    out.append(f"          - executor apply, summed over tasks: {task:.1f}s ({int(t.get('slices', 0))} slices)")
    phases = [(n, t[n]) for n in ("read", "plan", "group", "write") if t.get(n)]
    labels = {
        "read": "read-before-write (read_entries)",
        "plan": "plan_writes",
        "group": "partition + build batches",
        "write": "counter writes" if variant.startswith("counter") else "write_entries",
    }
    for name, value in phases:
        out.append(f"            - {labels[name]}: {value:.2f}s")
    rest = task - sum(v for _, v in phases)
    out.append(f"            - rows in from the shuffle + Delta decode: {rest:.2f}s")
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--words", type=int, default=1_000_000, help="words of input (default 1,000,000)")
    p.add_argument("--vocab", type=int, default=80_000, help="vocabulary size (default 80,000)")
    p.add_argument("--zipf-s", type=float, default=1.0, help="Zipf exponent of word frequencies (default 1.0)")
    p.add_argument("--words-per-line", type=int, default=10, help="mean words per Kafka message (default 10)")
    p.add_argument("--batches", type=int, default=5, help="micro-batches per run, via maxOffsetsPerTrigger (5)")
    p.add_argument("--rounds", type=int, default=4, help="runs of each variant, order alternating; medians (4)")
    p.add_argument("--variants", default="replay-safe,counter", help=f"comma-separated, of {', '.join(VARIANTS)}")
    p.add_argument("--partitions", type=int, default=4, help="Kafka topic and store partitions (default 4)")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2], as scripts/run)")
    p.add_argument("--shuffle-partitions", default="4", help="spark.sql.shuffle.partitions (default 4)")
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting for the session, repeatable (an experiment: applies to every variant)",
    )
    p.add_argument("--seed", type=int, default=20260415, help="corpus seed")
    p.add_argument("--warmup-rounds", type=int, default=1, help="untimed runs of each variant first (default 1)")
    p.add_argument("--no-profile", action="store_true", help="skip the profiled (untimed) runs")
    p.add_argument("--budget", type=float, default=0.15, help="allowed overhead (default 0.15)")
    p.add_argument(
        "--dead-letters",
        choices=("as-is", "count-first"),
        default="as-is",
        help="as-is: the job's dead-letter step; count-first: an experiment that skips streaming "
        "them when a count finds none (applies to every variant alike)",
    )
    p.add_argument("--attempts", type=int, default=3, help="tries of a run that fails (default 3)")
    p.add_argument("--stack-wait", type=float, default=300, help="seconds to wait for the stack to answer (300)")
    p.add_argument("--run-timeout", type=float, default=300, help="seconds one run may take")
    p.add_argument("--json", type=Path, help="also write every run's numbers to this file")
    p.add_argument("--keep", action="store_true", help="keep the keyspace and topics (for inspection)")
    args = p.parse_args(argv)
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if any("=" not in item for item in args.conf):
        p.error("--conf takes KEY=VALUE")
    unknown = set(args.variants) - set(VARIANTS)
    if unknown:
        p.error(f"unknown variants {sorted(unknown)}; use {', '.join(VARIANTS)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "cassandra", "statestore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    from pyspark import cloudpickle

    from statestore.spark import build_session

    # The baseline's functions are shipped to the Python workers by value, whatever the
    # module is called (run as a script or with -m).
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(sys.modules["bench.common"])

    tag = uuid.uuid4().hex[:8]
    keyspace = f"bench_{tag}"
    topic = f"bench-replay-{tag}"
    cassandra = cfg.resolve(CassandraConfig, overrides={"keyspace": keyspace})
    kafka = cfg.resolve(KafkaConfig)
    workdir = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    script_began = time.perf_counter()

    t = time.perf_counter()
    lines, truth = generate(args.words, args.vocab, args.zipf_s, args.words_per_line, args.seed)
    corpus = {
        "words": sum(truth.values()),
        "lines": len(lines),
        "vocabulary": args.vocab,
        "distinct_words": len(truth),
        "zipf_s": args.zipf_s,
        "top_share_50": zipf_rank_of(args.vocab, args.zipf_s, 0.5),
        "seed": args.seed,
    }
    # Spark shares the cap among the topic's partitions and rounds down: a little slack keeps
    # the last batch from being a sliver.
    max_offsets = math.ceil(len(lines) / args.batches) + args.partitions
    _log.info(
        "corpus: %d words in %d lines, %d distinct of %d, maxOffsetsPerTrigger %d (%.1fs)",
        corpus["words"],
        len(lines),
        len(truth),
        args.vocab,
        max_offsets,
        time.perf_counter() - t,
    )

    wait_for_stack(cassandra, kafka, args.stack_wait)
    session = session_for(cassandra)
    spark = None
    results: list[RunResult] = []
    profiles: dict[str, RunResult] = {}
    try:
        spark = build_session(
            "bench-replay-overhead",
            master=args.master,
            conf={
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": args.shuffle_partitions,
                "spark.driver.memory": "2g",
                **dict(item.split("=", 1) for item in args.conf),
            },
        )
        spark.sparkContext.setLogLevel("WARN")
        bench = Bench(args, spark, cassandra, kafka, workdir)
        bench.inputs[topic] = lines

        # Untimed full runs first: the first runs of a session are slower (JIT, Python workers,
        # connections; a warm-up on a smaller input still left the first timed run slow).
        for _ in range(args.warmup_rounds):
            for variant in args.variants:
                bench.run(variant, 0, topic, truth, max_offsets)

        for round_no in range(1, args.rounds + 1):
            order = args.variants if round_no % 2 else list(reversed(args.variants))
            for variant in order:
                results.append(bench.run(variant, round_no, topic, truth, max_offsets))

        if not args.no_profile:
            for variant in ("replay-safe", "counter"):  # the profiled appliers: partitioned layout
                if variant in args.variants:
                    profiles[variant] = bench.run(variant, 99, topic, truth, max_offsets, profile=True)

        info = machine_description(spark.version, session)
        summary = summarize(results, args.variants)
        keys = [k for r in results for k in r.keys_per_batch]
        corpus["keys_per_batch"] = f"{min(keys)}-{max(keys)}" if keys else "?"
        corpus["batches"] = sorted({r.batches for r in results})
        report = markdown(summary, profiles, args.budget)
        total = time.perf_counter() - script_began
        print()
        print("## machine")
        for k, v in info.items():
            print(f"- {k}: {v}")
        print("## input")
        for k, v in corpus.items():
            print(f"- {k}: {v}")
        print(f"## results ({args.rounds} round(s), alternating order; whole script {total:.0f}s)")
        print(report)
        if bench.failed_attempts:
            print("")
            print("runs repeated after a failure (not in the medians):")
            for line in bench.failed_attempts:
                print(f"  - {line}")
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "args": {k: str(v) for k, v in vars(args).items()},
                        "machine": info,
                        "input": corpus,
                        "summary": summary,
                        "runs": [asdict(r) for r in results],
                        "profiles": {k: asdict(v) for k, v in profiles.items()},
                        "script_s": total,
                        "failed_attempts": bench.failed_attempts,
                    },
                    indent=2,
                )
            )
        return 0
    finally:
        if not args.keep:
            drop_keyspace(session, keyspace, cassandra, kafka)
            delete_topics(kafka, [topic])
        shutil.rmtree(workdir, ignore_errors=True)
        if spark is not None:
            spark.stop()
        close_all()


if __name__ == "__main__":
    sys.exit(main())
