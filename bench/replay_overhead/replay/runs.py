"""One measured run of the replay-overhead benchmark (replay_overhead.py): the job
(statestore.stream.job.start) streams the topic into a fresh store with a fresh checkpoint,
with the run's BatchSeams (replay/seams.py); the wall time, Spark's durations, the CPU of
Spark and Cassandra, and (profiled runs) the driver's steps and the executor phases are
taken, and the final counts are checked against the ground truth.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench_common import (
    cassandra_pid,
    cpu_ticks_of,
    executor_timers,
    machine_ticks,
    process_tree_ticks,
    wait_for_stack,
)

from replay import GLOBAL_LAYOUT, SHORT
from replay.counter import counter_table, counter_table_cql
from replay.seams import EXECUTOR_PHASES, run_seams
from statestore.conn import kafka as kafka_io
from statestore.conn.cassandra import DDL_PROFILE, create_keyspace, session_for
from statestore.core.config import CassandraConfig, KafkaConfig, StreamConfig
from statestore.core.model import StoreSpec, StoreType
from statestore.store.provision import provision_store
from statestore.stream.job import JobConfig, start

_log = logging.getLogger("bench.replay_overhead")


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
        self.failed_attempts: list[str] = []
        self.inputs: dict[str, list[bytes]] = {}
        self.produced: set[str] = set()

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
        store = f"b{SHORT[variant]}{round_no}_{uuid.uuid4().hex[:8]}"
        global_layout = variant in GLOBAL_LAYOUT
        store_type = StoreType.GLOBAL_KV if global_layout else StoreType.PARTITIONED_KV
        spec = provision_store(
            self.session, StoreSpec(self.cassandra.keyspace, store, store_type, self.args.partitions), topic
        )
        timers = task_timer = None
        if profile:
            timers, task_timer = executor_timers(self.spark.sparkContext, EXECUTOR_PHASES)
        if variant.startswith("counter"):
            self.session.execute(counter_table_cql(spec.keyspace, store, global_layout), execution_profile=DDL_PROFILE)
        stream = StreamConfig(
            topic=topic,
            store=store,
            checkpoint=str(self.workdir / store),
            max_offsets_per_trigger=max_offsets,
        )
        batch_keys: list[int] = []
        driver: Counter = Counter()
        seams = run_seams(variant, self.args.dead_letters, driver, batch_keys, task_timer)
        cassandra_before = cpu_ticks_of(self.cassandra_pid)
        spark_before = process_tree_ticks(self.spark_pid)
        driver_before = sum(os.times()[:2])
        busy_before, _ = machine_ticks()
        load = os.getloadavg()[0]
        began = time.perf_counter()
        running = start(self.spark, JobConfig(stream, self.cassandra, self.kafka), seams)
        try:
            finished = running.query.awaitTermination(timeout=self.args.run_timeout)
            wall = time.perf_counter() - began
            if not finished:
                raise RuntimeError(f"{variant} run did not finish within {self.args.run_timeout} s")
            progress = running.query.recentProgress
        finally:
            running.stop()
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
            keys_per_batch=batch_keys,
            cassandra_cpu_s=cassandra_cpu,
            machine_busy_s=machine_busy,
            spark_cpu_s=spark_cpu,
            load_before=load,
            verified=verified,
            timers={n: a.value for n, a in timers.items()} if timers else {},
            spark_durations=dict(spark_parts),
            driver=dict(driver),
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
        from statestore.core.codecs import decode_long

        if variant.startswith("counter"):
            select = f"SELECT key, value FROM {spec.keyspace}.{counter_table(spec.name)}"
            decode = int
        else:
            select = f"SELECT key, value FROM {spec.keyspace}.{spec.table}"
            decode = decode_long
        from cassandra.query import SimpleStatement

        statement = SimpleStatement(select, fetch_size=5000)
        return {bytes(r.key).decode("utf-8"): decode(r.value) for r in self.session.execute(statement)}
