"""One system of the side-by-side benchmark in its own process (so its memory is its own):
`python -m compare.worker PLAN.json OUT.json` with bench/streaming_compare/ (compare) and
bench/ (bench_common) on PYTHONPATH, started by bench/streaming_compare/streaming_compare.py.

Phases, in the plan's order, all in one SparkSession:
  throughput  the corpus topic from the start, available-now, into a fresh store/checkpoint
  latency     a fresh topic fed at a fixed word rate while the query runs a processing-time
              trigger; every record's latency = its batch's commit - its Kafka timestamp
  restart     state grown to each size on a fresh topic; at each size, a few small probe
              batches, each with the query stopped and started again from its checkpoint
  profile     (our job) the throughput run again with the driver and the apply profiled

A thread samples the resident memory of this process tree (the Python driver, Spark's JVM
and its Python workers) and of Cassandra throughout, per phase. Our job runs with the plan's
experiments as statestore BatchSeams (compare/experiments.py); nothing of bench/ is shipped
to Spark's executors but the write ceiling's blind apply (compare/ceiling.py, by value).
"""

from __future__ import annotations

import json
import logging
import os
import random
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from bench_common import (
    cassandra_pid,
    cpu_ticks_of,
    jit_ticks,
    process_tree_ticks,
    process_tree_ticks_by_kind,
    wait_until_idle,
)

from compare import metrics
from compare.feed import FixedRateFeed, produce_all
from compare.systems import (
    AGGREGATED,
    BATCH_COUNTS,
    BLIND,
    HOP_MS,
    HOPPING,
    OURS,
    TIMED,
    WINDOW_AGGREGATED,
    WINDOW_MS,
    Running,
    Target,
    session_conf,
    start_system,
    state_rows,
)

_log = logging.getLogger("bench.compare_worker")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


class MemorySampler(threading.Thread):
    """Peak RSS of this process tree and of Cassandra, per phase, every `interval_s`. The
    tree's figure adds the RSS of every process (pages shared between forked Python workers
    count once per process: an upper bound)."""

    def __init__(self, cassandra: int | None, interval_s: float = 0.25) -> None:
        super().__init__(name="memory-sampler", daemon=True)
        import psutil

        self.root = psutil.Process(os.getpid())
        self.cassandra = psutil.Process(cassandra) if cassandra else None
        self.interval_s = interval_s
        self.phase = "start-up"
        self.peaks: dict[str, dict[str, float]] = {}
        self.done = threading.Event()

    def _tree_rss(self) -> int:
        total = 0
        for process in [self.root, *self.root.children(recursive=True)]:
            try:
                total += process.memory_info().rss
            except Exception:  # noqa: BLE001 - a Python worker may have exited meanwhile
                pass
        return total

    def sample(self) -> None:
        peak = self.peaks.setdefault(self.phase, {"spark_mb": 0.0, "cassandra_mb": 0.0})
        peak["spark_mb"] = max(peak["spark_mb"], self._tree_rss() / 2**20)
        if self.cassandra is not None:
            try:
                peak["cassandra_mb"] = max(peak["cassandra_mb"], self.cassandra.memory_info().rss / 2**20)
            except Exception:  # noqa: BLE001 - Cassandra restarted by someone: no sample
                pass

    def run(self) -> None:
        while not self.done.wait(self.interval_s):
            self.sample()


class Worker:
    def __init__(self, plan: dict, spark, cassandra, kafka, sampler: MemorySampler, seams=None, new_session=None):
        self.plan = plan
        # Builds a fresh SparkSession (a new JVM's worth of executor state): the cold restarts.
        self.new_session = new_session
        self.seams = seams  # our job's BatchSeams (the plan's experiments); None for Spark's systems
        self.system = plan["system"]
        self.slug = store_slug(self.system)
        self.spark = spark
        self.cassandra = cassandra
        self.kafka = kafka
        self.sampler = sampler
        self.workdir = Path(plan["workdir"])
        self.cassandra_pid = sampler.cassandra.pid if sampler.cassandra else None

    def start(self, topic: str, name: str, checkpoint: Path, trigger: str, seams=None) -> Running:
        """Start the system; our job with `seams` (default: the worker's)."""
        target = Target(topic, name, str(checkpoint), trigger)
        max_offsets = self.plan["max_offsets"]
        seams = seams or self.seams
        driver_records = self.plan.get("driver_apply_records")
        return start_system(
            self.spark, self.system, target, self.cassandra, self.kafka, max_offsets, seams, driver_records
        )

    def run_to_end(self, topic: str, name: str, checkpoint: Path, seams=None) -> tuple[list[dict], float]:
        """An available-now run; its progress events and the wall time from the start call."""
        began = time.perf_counter()
        running = self.start(topic, name, checkpoint, "available-now", seams)
        try:
            if not running.query.awaitTermination(timeout=self.plan["run_timeout_s"]):
                raise RuntimeError(f"{self.system} on {topic} did not finish within {self.plan['run_timeout_s']} s")
            wall = time.perf_counter() - began
            return [json.loads(p.json) for p in running.query.recentProgress], wall
        finally:
            running.stop()

    def cpu(self) -> tuple[int, int]:
        return process_tree_ticks(os.getpid()), cpu_ticks_of(self.cassandra_pid)

    # ------------------------------------------------------------------ phases

    def throughput(self) -> dict:
        index = metrics.RecordIndex.from_json(json.loads(Path(self.plan["corpus_index"]).read_text()))
        name = f"tp_{self.slug}_{self.plan['round']}"
        cpu_before, load = self.cpu(), os.getloadavg()[0]
        kinds_before, jit_before = process_tree_ticks_by_kind(os.getpid()), jit_ticks(os.getpid())
        events, wall = self.run_to_end(self.plan["corpus_topic"], name, self.workdir / name)
        cpu_after = self.cpu()
        kinds_after, jit_after = process_tree_ticks_by_kind(os.getpid()), jit_ticks(os.getpid())
        hz = os.sysconf("SC_CLK_TCK")
        result = metrics.throughput(events, index)
        result.update(
            wall_s=wall,
            spark_cpu_s=(cpu_after[0] - cpu_before[0]) / hz,
            cassandra_cpu_s=(cpu_after[1] - cpu_before[1]) / hz,
            # The Spark side's CPU by process: Python driver, Spark's JVM, Python workers.
            spark_cpu_by_kind_s={kind: (kinds_after[kind] - kinds_before[kind]) / hz for kind in kinds_after},
            # Of the JVM's: its just-in-time compiler's, which a JVM warm from the same work spares.
            jit_cpu_s=(jit_after - jit_before) / hz,
            load_before=load,
            verified=self.verify(name, events, index.records),
            spark_durations_s=_summed_durations(events),
        )
        _log.info(
            "%s throughput: %.0f words/s sustained, %d batches",
            self.system,
            result["sustained_words_per_s"],
            result["batches"],
        )
        return result

    def verify(self, name: str, events: list[dict], records: int) -> str:
        """Our job: every count equals the ground truth. Spark's stores: the number of keys in
        state equals the number of distinct words (a no-op sink keeps no counts to compare);
        their timed operators must have read all `records` of the corpus. The aggregated
        systems: every user's count, sum and max, ours read from the store, Spark's from its
        checkpoint's state (verify_aggregates)."""
        if self.system in AGGREGATED:
            return self.verify_aggregates(name)
        truth = json.loads(Path(self.plan["truth"]).read_text())
        if self.system == BLIND:  # blind writes: wrong counts by design, but every word a row
            written = len(read_counts(self.cassandra, name))
            if written != len(truth):
                raise AssertionError(f"{self.system}: {written} keys written, {len(truth)} distinct words in the input")
            return f"{written} keys written = distinct words (counts not checked: blind writes)"
        if self.system in OURS:
            counts = read_counts(self.cassandra, name)
            if self.system in HOPPING:  # every record counts in the WINDOW_MS // HOP_MS windows holding it
                truth = {word: count * (WINDOW_MS // HOP_MS) for word, count in truth.items()}
            if counts != truth:
                wrong = [k for k, v in truth.items() if counts.get(k) != v]
                sample = ", ".join(f"{k!r}: {counts.get(k)} for {truth[k]}" for k in wrong[:5])
                raise AssertionError(
                    f"{self.system}: {len(wrong)} of {len(truth)} counts differ from the ground truth ({sample}; "
                    f"{sum(counts.values())} counted in all for {sum(truth.values())})"
                )
            return f"all {len(truth)} counts equal the ground truth"
        if self.system == "stateless":
            return "no state"
        rows = state_rows(events)
        if self.system in TIMED or self.system in BATCH_COUNTS:
            # Windows and sessions behind the watermark leave Spark's state: only the input is
            # known to have been read whole.
            read = sum(e.get("numInputRows", 0) for e in events)
            if read != records:
                raise AssertionError(f"{self.system}: {read} records read of the corpus's {records}")
            kept = "no state" if self.system in BATCH_COUNTS else f"{rows} rows in state at the end"
            return f"every one of the corpus's {records} records read; {kept}"
        if rows != len(truth):
            raise AssertionError(f"{self.system}: {rows} keys in state, {len(truth)} distinct words in the input")
        return f"{rows} keys in state = distinct words"

    def verify_aggregates(self, name: str) -> str:
        """Every user's (count, sum, max) that the system kept against the ground truth (raises
        on any difference): ours as the store's codec decodes them, Spark's as its RocksDB state
        holds them after the run (Spark's state data source over the query's checkpoint, which
        `throughput` keeps at workdir/name). The windowed pair: every (user, window start)'s,
        against the window truth."""
        from compare.events import check_aggregates, check_window_aggregates, truth_from_json, window_truth_from_json

        if self.system in WINDOW_AGGREGATED:
            truth = window_truth_from_json(json.loads(Path(self.plan["window_truth"]).read_text()))
            if self.system in OURS:
                kept = read_window_aggregates(self.cassandra, name)
            else:
                kept = spark_window_state_aggregates(self.spark, self.workdir / name)
            return check_window_aggregates(self.system, kept, truth)
        truth = truth_from_json(json.loads(Path(self.plan["truth"]).read_text()))
        if self.system in OURS:
            kept = read_aggregates(self.cassandra, name)
        else:
            kept = spark_state_aggregates(self.spark, self.workdir / name)
        return check_aggregates(self.system, kept, truth)

    def latency(self) -> dict:
        from statestore.conn import kafka as kafka_io

        cfg = self.plan["latency"]
        topic = f"{self.plan['tag']}-lat-{self.system}"
        kafka_io.ensure_topic(self.kafka, topic, self.plan["partitions"])
        lines = Path(self.plan["corpus_lines"]).read_bytes().split(b"\n")
        words = json.loads(Path(self.plan["corpus_words"]).read_text())
        span = min(len(lines), int(cfg["rate"] * cfg["seconds"] / 5) + 1000)
        running = self.start(topic, f"lat_{self.slug}", self.workdir / "latency", cfg["trigger"])
        try:
            # A first batch before the clock starts: the session's first query pays for cold
            # code, Python workers and connections, which is not latency at a steady rate.
            warm = produce_all(self.kafka.bootstrap_servers, topic, lines[:100], words[:100])
            _wait_until_read(running.query, _ends(warm), cfg["drain_s"] + self.plan["run_timeout_s"] / 10)
            feed = FixedRateFeed(
                self.kafka.bootstrap_servers, topic, cfg["rate"], cfg["seconds"], lines[:span], words[:span]
            )
            feed.start()
            feed.join(cfg["seconds"] + 120)
            if feed.error is not None:
                raise feed.error
            produced = feed.index.records
            _wait_until_read(running.query, _ends(feed.index), cfg["drain_s"])
            events = [json.loads(p.json) for p in running.query.recentProgress]
        finally:
            running.stop()
        measured_from = feed.started_ms + cfg["warmup_s"] * 1000
        latencies = metrics.record_latencies(events, feed.index, measured_from)
        due = sum(1 for ts in _all_timestamps(feed.index) if ts >= measured_from)
        result = metrics.latency_summary(latencies, due, len(latencies))
        result.update(
            rate_words_per_s=cfg["rate"], trigger=cfg["trigger"], produced=produced, feed_behind_s=feed.behind_s
        )
        batches = metrics.data_batches(events)
        result["batch_p50_s"] = metrics.percentile([b["durationMs"]["triggerExecution"] / 1000 for b in batches], 50)
        _log.info("%s latency: p50 %s s, p99 %s s", self.system, result["p50_s"], result["p99_s"])
        return result

    def restart(self) -> dict:
        from statestore.conn import kafka as kafka_io

        cfg = self.plan["restart"]
        topic = f"{self.plan['tag']}-rs-{self.system}"
        kafka_io.ensure_topic(self.kafka, topic, self.plan["partitions"])
        name, checkpoint = f"rs_{self.slug}", self.workdir / "restart"
        rng = random.Random(7)
        filled, out = 0, []
        for size in cfg["sizes"]:
            fill = [fill_line(range(start, min(start + 10, size))) for start in range(filled, size, 10)]
            produce_all(self.kafka.bootstrap_servers, topic, fill, [len(x.split()) for x in fill])
            began = time.perf_counter()
            events, _ = self.run_to_end(topic, name, checkpoint)
            fill_s = time.perf_counter() - began
            keys = self.state_size(name, events)
            if keys != size:
                raise AssertionError(f"{self.system}: {keys} keys in state after filling to {size}")
            filled = size
            settled_s = self.cassandra_settled()
            runs = []
            # One untimed restart first: the first one of a session pays one-off costs
            # (classes, native libraries) that have nothing to do with the state's size.
            for repeat in range(cfg["repeats"] + (1 if not out else 0)):
                probe = [fill_line(rng.randrange(size) for _ in range(10)) for _ in range(cfg["probe_words"] // 10)]
                produce_all(self.kafka.bootstrap_servers, topic, probe, [10] * len(probe))
                started_ms = time.time() * 1000
                events, _ = self.run_to_end(topic, name, checkpoint)
                measured = metrics.restart_seconds(started_ms, events)
                if measured is None:
                    raise AssertionError(f"{self.system}: no batch read the probe after the restart at {size} keys")
                if out or repeat > 0:
                    runs.append(measured)
            restart = statistics.median(r["restart_s"] for r in runs)
            _log.info(
                "%s restart at %d keys: %.2f s (fill %.1f s, Cassandra idle %.1f s later)",
                self.system,
                size,
                restart,
                fill_s,
                settled_s,
            )
            out.append({"keys": size, "restart_s": restart, "runs": runs, "fill_s": fill_s, "settled_s": settled_s})
            if cfg.get("cold") and self.new_session is not None:
                # As many as the warm restarts: one cold restart moves by half a second with
                # the machine's load. The median run is kept whole, with every run's time.
                colds = sorted(
                    (self.cold_restart(topic, name, checkpoint, size, rng) for _ in range(cfg["repeats"])),
                    key=lambda run: run["restart_s"],
                )
                out[-1]["cold"] = {**colds[len(colds) // 2], "runs_s": [run["restart_s"] for run in colds]}
                _log.info(
                    "%s cold restart at %d keys: %.2f s (of %s)",
                    self.system,
                    size,
                    out[-1]["cold"]["restart_s"],
                    out[-1]["cold"]["runs_s"],
                )
        return {"sizes": out}

    def cassandra_settled(self, idle_cores: float = 0.1, limit_s: float = 600.0) -> float:
        """Wait until Cassandra uses under `idle_cores` of a core over a second (at most
        `limit_s`); the seconds waited. A fill of millions of keys leaves Cassandra compacting
        for minutes after it: restarts timed at once would share the two cores with that (ours'
        fill writes to Cassandra, Spark's own does not), which measures the machine's load, not
        what a restart costs at that state size. Every system waits the same way."""
        return wait_until_idle(self.cassandra_pid, idle_cores, limit_s)

    def cold_restart(self, topic: str, name: str, checkpoint: Path, size: int, rng) -> dict:
        """A restart on what is, to Spark, a new machine: the SparkSession (driver, executor,
        their local directories and every loaded state store) is stopped and a new one built
        before the query starts from its checkpoint. Timed from the query's start, as the warm
        restarts are (the new session's own start-up is the same for every system)."""
        probe = [
            fill_line(rng.randrange(size) for _ in range(10)) for _ in range(self.plan["restart"]["probe_words"] // 10)
        ]
        produce_all(self.kafka.bootstrap_servers, topic, probe, [10] * len(probe))
        self.spark.stop()
        self.spark = self.new_session()
        started_ms = time.time() * 1000
        events, _ = self.run_to_end(topic, name, checkpoint)
        measured = metrics.restart_seconds(started_ms, events)
        if measured is None:
            raise AssertionError(f"{self.system}: no batch read the probe after the cold restart at {size} keys")
        return measured

    def state_size(self, name: str, events: list[dict]) -> int | None:
        if self.system in OURS:
            from statestore.conn.cassandra import session_for
            from statestore.store.book import registry
            from statestore.store.tables import table_for

            session = session_for(self.cassandra)
            return table_for(registry.lookup(session, self.cassandra.keyspace, name)).count(session)
        return state_rows(events)

    def profile(self) -> dict:
        from compare.profile import profiled_run, restarted_run

        index = metrics.RecordIndex.from_json(json.loads(Path(self.plan["corpus_index"]).read_text()))
        result = profiled_run(self, index)
        if self.system == "partitioned":  # the apply cache after a restart, on a store with state
            result["restarted"] = restarted_run(self, index)
            _log.info("%s restarted half-way: %s", self.system, result["restarted"])
        return result


def store_slug(system: str) -> str:
    """The system's name in its stores' names (letters, digits, '_'; a store's name has at most
    32 characters, so "window-aggregate" is shortened to "window_agg")."""
    return system.replace("window-aggregate", "window-agg").replace("-", "_")


def fill_line(keys) -> bytes:
    """Ten (or fewer) state keys as one line: key i is 'k' and i in base 26, five letters."""
    words = []
    for i in keys:
        letters = ""
        for _ in range(5):
            i, digit = divmod(i, 26)
            letters = _LETTERS[digit] + letters
        words.append("k" + letters)
    return " ".join(words).encode("ascii")


def read_counts(cassandra, store: str) -> dict[str, int]:
    """Each word's count; a window store's: the sum over the word's windows (every word once
    per window it was seen in: with tumbling windows the sums are the words' counts); a session
    store's: the sum over the word's sessions (every occurrence in exactly one)."""
    from statestore.conn.cassandra import session_for
    from statestore.core.codecs import decode_long
    from statestore.store.book import registry
    from statestore.store.builder import open_session_store, open_window_store
    from statestore.store.tables import table_for

    session = session_for(cassandra)
    spec = registry.lookup(session, cassandra.keyspace, store)
    if spec.store_type.timed:
        sums: Counter = Counter()
        opened = (open_session_store if spec.store_type.sessioned else open_window_store)(
            session, cassandra.keyspace, store
        )
        for entry in opened.all():
            sums[entry.key] += entry.value
        return dict(sums)
    table = table_for(spec)
    return {e.key.decode("utf-8"): decode_long(e.value) for e in table.scan_unordered(session)}


def read_aggregates(cassandra, store: str) -> dict[str, tuple]:
    """Each key's measures of an aggregate store (compare/events.py's MEASURES), in their order,
    as the store's codec decodes them."""
    from statestore.conn.cassandra import session_for
    from statestore.core.codecs import codec_named
    from statestore.store.book import registry
    from statestore.store.tables import table_for

    session = session_for(cassandra)
    spec = registry.lookup(session, cassandra.keyspace, store)
    codec = codec_named(spec.value_codec)
    out = {}
    for entry in table_for(spec).scan_unordered(session):
        values = codec.decode(entry.value)
        out[entry.key.decode("utf-8")] = tuple(values.values())
    return out


def read_window_aggregates(cassandra, store: str) -> dict[tuple[str, int], tuple]:
    """Each (key, window start)'s measures of a window aggregate store, in their order, as the
    library reads them (WindowStore.all: every retained window, values by the store's codec)."""
    from statestore.conn.cassandra import session_for
    from statestore.store.builder import open_window_store

    opened = open_window_store(session_for(cassandra), cassandra.keyspace, store)
    out = {}
    for window in opened.all():
        key = window.key.decode("utf-8") if isinstance(window.key, bytes) else window.key
        out[(key, window.start_ms)] = tuple(window.value.values())
    return out


def spark_window_state_aggregates(spark, checkpoint: Path) -> dict[tuple[str, int], tuple]:
    """Each (user, window start)'s (count, sum, max) as Spark's windowed aggregation last kept
    it. Its state holds only the windows the watermark has not yet passed (each batch evicts
    the rest), so the state of every committed batch is read (the state data source's batchId)
    and a window's values are those of the last batch whose state holds it: a window leaves
    the state once, after its last update (a row for a window behind the watermark is dropped,
    never counted). The key is a struct of the window (start, end) and the user; the value the
    aggregation's buffers in the query's order."""
    commits = [int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()]
    out: dict[tuple[str, int], tuple] = {}
    for batch in range(max(commits, default=-1) + 1):
        state = spark.read.format("statestore").option("batchId", batch).load(str(checkpoint))
        rows = state.selectExpr("key.user", "unix_millis(key.window.start)", "value.*").collect()
        out.update({(row[0], row[1]): tuple(row[2:]) for row in rows})
    return out


def spark_state_aggregates(spark, checkpoint: Path) -> dict[str, tuple]:
    """Each user's (count, sum, max) in the state of Spark's aggregation, read from the query's
    checkpoint with Spark's state data source: the key's one column, then the aggregation's
    buffers (count, sum, max) in the query's order."""
    rows = spark.read.format("statestore").load(str(checkpoint)).select("key.*", "value.*").collect()
    return {row[0]: tuple(row[1:]) for row in rows}


def _summed_durations(events: list[dict]) -> dict[str, float]:
    total: Counter = Counter()
    for e in events:
        total.update({k: v / 1000 for k, v in e["durationMs"].items()})
    return dict(total)


def _ends(index: metrics.RecordIndex) -> dict[int, int]:
    """The offset after the last recorded record, per partition."""
    return {p: index.base[p] + len(words) for p, words in index.words.items()}


def _wait_until_read(query, ends: dict[int, int], timeout_s: float) -> bool:
    """Wait until the query's last batch has read up to `ends`; False on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        progress = query.lastProgress
        if progress is not None:
            _, read = metrics.batch_range(json.loads(progress.json))
            if all(read.get(p, 0) >= end for p, end in ends.items()):
                return True
        time.sleep(0.25)
    return False


def _all_timestamps(index: metrics.RecordIndex):
    for stamps in index.timestamps_ms.values():
        yield from stamps


def main(argv: list[str]) -> int:
    from statestore.conn.cassandra import close_all
    from statestore.conn.spark import build_session
    from statestore.core import config as cfg
    from statestore.core.config import CassandraConfig, KafkaConfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "cassandra", "statestore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    plan = json.loads(Path(argv[0]).read_text())
    sampler = MemorySampler(cassandra_pid())
    sampler.start()
    cassandra = cfg.resolve(CassandraConfig, overrides={"keyspace": plan["keyspace"]})
    kafka = cfg.resolve(KafkaConfig)
    conf = {
        **session_conf(plan["system"], plan["shuffle_partitions"], plan["driver_memory"]),
        **plan.get("spark_conf", {}),
    }
    began = time.perf_counter()

    def new_session():
        session = build_session(f"bench-compare-{plan['system']}", master=plan["master"], conf=conf)
        session.sparkContext.setLogLevel("WARN")
        return session

    spark = new_session()
    seams = None
    if plan["system"] in OURS:
        from compare.experiments import seams as experiment_seams

        seams = experiment_seams(plan.get("experiments", []))
        if plan["system"] == BLIND:
            from dataclasses import replace

            from pyspark import cloudpickle

            from compare import ceiling

            # Its apply runs on the executors, which do not have bench/ on their path.
            cloudpickle.register_pickle_by_value(ceiling)
            seams = replace(seams, make_applier=ceiling.blind_applier)
    result: dict = {"system": plan["system"], "round": plan["round"], "spark_version": spark.version}
    result["session_start_s"] = time.perf_counter() - began
    worker = Worker(plan, spark, cassandra, kafka, sampler, seams, new_session)
    try:
        for phase in plan["phases"]:
            sampler.phase = phase
            result[phase] = getattr(worker, phase)()
    finally:
        sampler.sample()
        sampler.done.set()
        result["memory"] = sampler.peaks
        Path(argv[1]).write_text(json.dumps(result, indent=1))
        worker.spark.stop()
        close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
