"""The soak: the word-count stream for an hour at a steady rate, with the HTTP API under light
load and the maintenance jobs run once in the middle; every minute, what each process holds and
how the stream keeps up (issue 34).

One key-value store (`soak`, 4 store partitions) in keyspace bench_soak, fed from a 4-partition
topic at --rate words per second (a Zipf corpus of six minutes, sent again and again, whole
corpora only, so the truth is the corpus' counts times the times sent). The stream runs as
`make run` submits it (spark-submit, local[2], --trigger 10s, the apply cache on). Beside it:
`statestore serve --workers 1` answering --http-rate point gets per second of random words, and
at the middle the maintenance jobs in the DAG's order (`make maintenance`: expire with 30d,
compact, audit, validate), each by spark-submit, their exit codes and times recorded.

Every --sample-s seconds: resident memory of the stream's driver (Python), its Spark JVM, its
Python workers, the API server, Cassandra and Kafka; disk of the executors' apply-cache files,
of the keyspace in Cassandra and of the checkpoint; the lag (`statestore status`); the batches
recorded in the stream log since the previous sample (count, seconds, rows written, words); the
API's answers and their p99. At the end the producer stops, the stream catches up (lag 0), and
every count is compared with the truth.

    .venv/bin/python bench/soak/soak.py                    # make bench-soak: 60 minutes
    .venv/bin/python bench/soak/soak.py --minutes 5        # a short try

Writes .stack/bench-results/soak/soak.json and soak.png (bench/results/soak/ with
STATESTORE_BENCH_PUBLISH=1). Needs the local stack (scripts/stack up).
"""

from __future__ import annotations

import argparse
import glob
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import bench_common
from bench_common import PROJECT, generate

from statestore.conn import kafka as kafka_io
from statestore.conn.spark import connector_jars
from statestore.core.codecs import decode_long, decode_text
from statestore.core.config import KafkaConfig
from statestore.store.book import registry, stream_log
from statestore.store.tables import table_for

KEYSPACE = "bench_soak"
STORE = "soak"
PAGE = 4096  # bytes of a memory page, for /proc/PID/statm
BIN = Path(sys.executable).parent


def _rss_mib(pid: int) -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20
    except (OSError, IndexError, ValueError):
        return 0.0


def _tree(root: int) -> dict[int, tuple[int, str]]:
    """pid -> (parent, name) of every live descendant of `root` and root itself."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                name, rest = (entry / "stat").read_text().split(" (", 1)[1].rsplit(")", 1)
            except (OSError, ValueError):
                continue
            table[int(entry.name)] = (int(rest.split()[1]), name)
    found = {}
    for pid, (parent, name) in table.items():
        walk = pid
        while walk not in (0, 1, root) and walk in table:
            walk = table[walk][0]
        if walk == root:
            found[pid] = (parent, name)
    return found


def stream_memory(submit_pid: int) -> dict[str, float]:
    """RSS (MiB) of the stream's processes: the Spark JVM (spark-submit's java), the Python
    driver it starts, and the Python workers (the pyspark daemon and its forks)."""
    memory = {"spark jvm": 0.0, "python driver": 0.0, "python workers": 0.0}
    tree = _tree(submit_pid)
    jvms = {pid for pid, (_, name) in tree.items() if name == "java"}
    for pid, (parent, name) in tree.items():
        if name == "java":
            memory["spark jvm"] += _rss_mib(pid)
        elif name.startswith("python") and parent in jvms and "pyspark.daemon" not in _cmdline(pid):
            memory["python driver"] += _rss_mib(pid)
        elif name.startswith("python"):
            memory["python workers"] += _rss_mib(pid)
    return {k: round(v, 1) for k, v in memory.items()}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _du_mib(*patterns: str) -> float:
    total = 0
    for pattern in patterns:
        for top in glob.glob(pattern):
            for folder, _dirs, files in os.walk(top):
                for name in files:
                    try:
                        total += os.stat(os.path.join(folder, name)).st_blocks * 512
                    except OSError:
                        pass
    return round(total / 2**20, 1)


def apply_cache_dirs(since: float) -> list[str]:
    """The executors' apply-cache folders of a Spark application started at `since` (local
    mode: under its own /tmp/spark-*/userFiles-*, made after it started; other applications'
    folders are left out)."""
    found = glob.glob("/tmp/spark-*/userFiles-*/statestore-apply-cache")
    return [path for path in found if os.stat(os.path.dirname(path)).st_ctime >= since - 1]


class Producer(threading.Thread):
    """Sends the corpus again and again at `rate` words/s, in tenths of a second; stops only
    between two corpora, so `sent` whole corpora are the truth's multiplier."""

    def __init__(self, kafka: KafkaConfig, topic: str, lines: list[bytes], words: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.kafka, self.topic, self.lines, self.rate = kafka, topic, lines, rate
        self.per_tick = max(1, round(len(lines) * rate / words / 10))
        self.sent = 0
        self.error: str | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            kafka_io.produce(self.kafka, self.topic, self._paced())
        except Exception as exc:  # noqa: BLE001 - reported at the end, with the counts
            self.error = repr(exc)

    def _paced(self):
        tick = time.monotonic()
        while not self.stop.is_set():
            for at in range(0, len(self.lines), self.per_tick):
                yield from self.lines[at : at + self.per_tick]
                tick += 0.1
                time.sleep(max(0.0, tick - time.monotonic()))
            self.sent += 1  # produce() raises if any of its records is not acknowledged


class HttpLoad(threading.Thread):
    """`rate` point gets per second of random vocabulary words, one keep-alive connection;
    answers by status and latencies kept per sample period."""

    def __init__(self, url: str, words: list[str], rate: float) -> None:
        super().__init__(daemon=True)
        self.host, self.port = url.removeprefix("http://").split(":")
        self.words, self.rate = words, rate
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.statuses: Counter = Counter()
        self.latencies_ms: list[float] = []

    def take(self) -> tuple[Counter, list[float]]:
        with self.lock:
            taken = self.statuses, self.latencies_ms
            self.statuses, self.latencies_ms = Counter(), []
        return taken

    def run(self) -> None:
        rng = random.Random(7)
        connection = http.client.HTTPConnection(self.host, int(self.port), timeout=10)
        while not self.stop.wait(1 / self.rate):
            began = time.perf_counter()
            try:
                connection.request("GET", f"/stores/{STORE}/keys/{rng.choice(self.words)}")
                response = connection.getresponse()
                response.read()
                status = str(response.status)
            except (OSError, http.client.HTTPException) as exc:
                status = type(exc).__name__
                connection.close()
            with self.lock:
                self.statuses[status] += 1
                self.latencies_ms.append((time.perf_counter() - began) * 1000)


def _env() -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_PYTHON")}
    return base | {"STATESTORE_KEYSPACE": KEYSPACE, "PATH": f"{BIN}:{base['PATH']}"}


def submit_stream(topic: str, checkpoint: Path, log: Path) -> subprocess.Popen:
    argv = [
        "spark-submit",
        *("--master", "local[2]", "--driver-memory", "1g"),
        *("--jars", ",".join(connector_jars())),
        "--driver-java-options",
        f"-Dlog4j.configurationFile=file:{PROJECT / 'statestore' / 'conn' / 'spark-log4j2.properties'}",
        str(PROJECT / "jobs" / "wordcount_stream.py"),
        *("--topic", topic, "--store", STORE, "--checkpoint", str(checkpoint), "--trigger", "10s"),
        *("--partitions", "4"),
    ]
    return subprocess.Popen(argv, env=_env(), stdout=open(log, "w"), stderr=subprocess.STDOUT)


def lag() -> int | None:
    done = subprocess.run(
        [str(BIN / "statestore"), "status", STORE, "--format", "json"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        return None
    return json.loads(done.stdout).get("lag_total")


def run_maintenance(checkpoint: Path, reports: Path) -> list[dict]:
    """The DAG's jobs in its order, as `make maintenance` runs them on one store."""
    jobs = [
        ("expire_state", ["--retention", "30d"]),
        ("compact_state", []),
        ("audit_partitions", []),
        ("validate_idempotency", ["--checkpoint", str(checkpoint)]),
    ]
    ran = []
    for job, extra in jobs:
        began = time.monotonic()
        argv = [sys.executable, str(PROJECT / "jobs" / f"{job}.py"), "--store", STORE, *extra]
        argv += ["--report-dir", str(reports / job)]
        done = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=1800)
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        ran.append({"job": job, "exit": done.returncode, "seconds": round(time.monotonic() - began, 1), "tail": tail})
        print(f"  {job}: exit {done.returncode} in {ran[-1]['seconds']} s", file=sys.stderr)
    return ran


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (minute, value) points, per hour."""
    if len(points) < 3:
        return None
    xs, ys = zip(*points, strict=True)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return None if den == 0 else round(60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den, 2)


def _series_summary(points: list[tuple[float, float]], half: float) -> dict:
    """first, last, max and the slope per hour of (minute, value) points, over the whole steady
    run and over its second half (after the maintenance jobs)."""
    values = [v for _, v in points]
    late = [(m, v) for m, v in points if m >= half]
    return {
        "first": values[0],
        "last": values[-1],
        "max": max(values),
        "mean": round(statistics.fmean(values), 2),
        "slope_per_hour": slope_per_hour(points),
        "slope_per_hour_second_half": slope_per_hour(late),
    }


def _key(name: str) -> str:
    return name.replace(" ", "_")


def summarize(result: dict, warmup_min: float = 5) -> dict:
    """The run's figures for BENCHMARKS.md, from its samples: each series after the warm-up
    (its first `warmup_min` minutes: the JVMs and Cassandra's memtables settling), the lag, the
    API's answers, the maintenance jobs and the end's check."""
    samples = result["samples"]
    steady = [s for s in samples if s["minute"] >= warmup_min]
    half = (steady[0]["minute"] + steady[-1]["minute"]) / 2
    summary: dict = {"minutes": steady[-1]["minute"], "samples": len(samples), "warmup_min": warmup_min}
    for group in ("rss_mib", "disk_mib"):
        summary[group] = {
            _key(name): _series_summary([(s["minute"], s[group][name]) for s in steady], half)
            for name in steady[0][group]
        }
    timed = [(s["minute"], s["batch_seconds_median"]) for s in steady if s["batch_seconds_median"] is not None]
    summary["batch_seconds_median"] = _series_summary(timed, half)
    summary["batch_seconds_max"] = max(s["batch_seconds_max"] or 0 for s in steady)
    summary["batches"] = sum(s["batches"] for s in samples)
    summary["rows_written_per_sample"] = _series_summary([(s["minute"], s["rows_written"]) for s in steady], half)
    lags = [s["lag"] for s in steady if s["lag"] is not None]
    words_per_line = result["settings"]["corpus_words"] / max(1, result["settings"].get("corpus_lines", 1))
    summary["lag"] = {
        "max": max(lags),
        "median": statistics.median(lags),
        "unknown_samples": sum(1 for s in steady if s["lag"] is None),
        "slope_per_hour": slope_per_hour([(s["minute"], s["lag"]) for s in steady if s["lag"] is not None]),
    }
    summary["lines_per_trigger"] = round(result["settings"]["rate"] * 10 / words_per_line)
    answers: Counter = Counter()
    for s in samples:
        answers.update(s["http"])
    p99s = [s["http_p99_ms"] for s in steady if s["http_p99_ms"] is not None]
    summary["http"] = {
        "requests": sum(answers.values()),
        "by_status": dict(answers),
        "errors": sum(n for status, n in answers.items() if status not in ("200", "404")),
        "p99_ms_median": statistics.median(p99s),
        "p99_ms_max": max(p99s),
    }
    jobs = result["maintenance"]["jobs"]
    summary["maintenance"] = {
        "minute": result["maintenance"]["minute"],
        "exit_codes": {job["job"]: job["exit"] for job in jobs},
        "seconds": {job["job"]: job["seconds"] for job in jobs},
    }
    summary["end"] = result["end"]
    return summary


def plot(samples: list[dict], path: Path, maintenance_minute: float | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s["minute"] for s in samples]
    figure, axes = plt.subplots(2, 3, figsize=(15, 7), sharex=True)
    for name in samples[0]["rss_mib"]:
        axes[0][0].plot(minutes, [s["rss_mib"][name] for s in samples], label=name)
    axes[0][0].set_title("resident memory, MiB")
    for name in samples[0]["disk_mib"]:
        axes[0][1].plot(minutes, [s["disk_mib"][name] for s in samples], label=name)
    axes[0][1].set_title("disk, MiB")
    axes[0][2].plot(minutes, [s["rows_written"] for s in samples], label="rows written")
    axes[0][2].plot(minutes, [s["words"] for s in samples], label="words counted")
    axes[0][2].set_title("per sample")
    axes[1][0].plot(minutes, [s["batch_seconds_median"] for s in samples], label="median batch, s")
    axes[1][0].plot(minutes, [s["batch_seconds_max"] for s in samples], label="slowest batch, s")
    axes[1][0].set_title("batch duration (10 s trigger)")
    axes[1][1].plot(minutes, [s["lag"] or 0 for s in samples], label="lag, records")
    axes[1][1].set_title("lag when sampled (records not yet counted)")
    axes[1][2].plot(minutes, [s["http_p99_ms"] or 0 for s in samples], label="p99, ms")
    axes[1][2].set_title("HTTP point gets")
    for axis in axes.flat:
        if maintenance_minute is not None:
            axis.axvline(maintenance_minute, color="grey", linestyle=":", label="maintenance jobs")
        axis.legend(fontsize=7)
        axis.grid(alpha=0.3)
    for axis in axes[1]:
        axis.set_xlabel("minute")
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--rate", type=float, default=5000, help="words per second offered")
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--http-rate", type=float, default=20)
    parser.add_argument("--sample-s", type=float, default=60)
    parser.add_argument("--summarize", type=Path, help="only (re)write the summary of this run's JSON and its plot")
    args = parser.parse_args()
    if args.summarize:
        result = json.loads(args.summarize.read_text())
        result["settings"].setdefault(
            "corpus_lines",
            len(generate(result["settings"]["corpus_words"], result["settings"]["vocab"], 1.1, 12, seed=34)[0]),
        )
        result.pop("trends_after_5_min", None)
        result["summary"] = summarize(result)
        args.summarize.write_text(json.dumps(result, indent=1) + "\n")
        plot(result["samples"], args.summarize.with_name("soak.png"), result["maintenance"]["minute"])
        print(json.dumps(result["summary"], indent=1))
        return 0

    corpus_words = int(args.rate * min(360, args.minutes * 60 / 4))
    lines, truth = generate(corpus_words, args.vocab, 1.1, 12, seed=34)
    workdir, _cassandra, kafka, session = bench_common.fresh_run("soak", KEYSPACE)
    topic = f"bench-soak-{uuid.uuid4().hex[:6]}"
    kafka_io.ensure_topic(kafka, topic, 4)
    checkpoint = workdir / "checkpoint"
    stream_began = time.time()
    stream = submit_stream(topic, checkpoint, workdir / "stream.log")
    producer = Producer(kafka, topic, lines, corpus_words, args.rate)
    producer.start()
    sys.path.insert(1, str(PROJECT / "bench" / "query_api"))
    import query_api

    query_api.KEYSPACE = KEYSPACE
    server = url = http_load = None
    cassandra_pid, kafka_pid = bench_common.stack_pid("cassandra"), bench_common.stack_pid("kafka")
    began = time.monotonic()
    samples: list[dict] = []
    seen_batch = -1
    maintenance: list[dict] = []
    maintenance_minute = None
    try:
        while time.monotonic() - began < args.minutes * 60:
            time.sleep(args.sample_s)
            minute = round((time.monotonic() - began) / 60, 2)
            if stream.poll() is not None:
                raise SystemExit(f"the stream stopped (exit {stream.returncode}); see {workdir / 'stream.log'}")
            if server is None:
                try:
                    registry.lookup(session, KEYSPACE, STORE)
                except Exception:  # noqa: BLE001 - the stream has not made its store yet
                    continue
                server, url = query_api.serve("--workers", "1")
                http_load = HttpLoad(url, sorted(truth), args.http_rate)
                http_load.start()
            batches = [
                b for b in stream_log.recent_batches(session, KEYSPACE, STORE, limit=60) if b.batch_id > seen_batch
            ]
            seen_batch = max([seen_batch] + [b.batch_id for b in batches])
            statuses, latencies = http_load.take()
            seconds = [b.seconds for b in batches]
            sample = {
                "minute": minute,
                "rss_mib": stream_memory(stream.pid)
                | {
                    "api server": round(_rss_mib(server.pid), 1),
                    "cassandra": round(_rss_mib(cassandra_pid), 1),
                    "kafka": round(_rss_mib(kafka_pid), 1),
                },
                "disk_mib": {
                    "apply cache": _du_mib(*apply_cache_dirs(stream_began)),
                    "cassandra keyspace": _du_mib(str(PROJECT / ".stack" / "data" / "cassandra" / "data" / KEYSPACE)),
                    "checkpoint": _du_mib(str(checkpoint)),
                },
                "lag": lag(),
                "batches": len(batches),
                "batch_seconds_median": round(statistics.median(seconds), 2) if seconds else None,
                "batch_seconds_max": round(max(seconds), 2) if seconds else None,
                "rows_written": sum(b.written for b in batches),
                "words": sum(b.words for b in batches),
                "http": dict(statuses),
                "http_p99_ms": round(sorted(latencies)[int(0.99 * (len(latencies) - 1))], 1) if latencies else None,
            }
            samples.append(sample)
            print(json.dumps(sample), file=sys.stderr)
            if not maintenance and minute >= args.minutes / 2:
                maintenance_minute = minute
                maintenance = run_maintenance(checkpoint, workdir / "reports")
        producer.stop.set()
        producer.join(timeout=600)
        caught_up = time.monotonic()
        while (remaining := lag()) != 0 and time.monotonic() - caught_up < 300:
            time.sleep(5)
        table = table_for(registry.lookup(session, KEYSPACE, STORE))
        counted = {decode_text(e.key): decode_long(e.value) for e in table.scan_sorted(session)}
        expected = {word: n * producer.sent for word, n in truth.items()}
        wrong = sum(1 for word in expected.keys() | counted.keys() if counted.get(word) != expected.get(word))
    finally:
        producer.stop.set()
        if http_load is not None:
            http_load.stop.set()
        if server is not None:
            server.terminate()
            server.wait(30)
        stream.terminate()
        try:
            stream.wait(60)
        except subprocess.TimeoutExpired:
            stream.kill()
    result = {
        "machine": bench_common.machine_description(),
        "settings": vars(args)
        | {"corpus_words": corpus_words, "corpus_lines": len(lines), "trigger": "10s", "store_partitions": 4},
        "samples": samples,
        "maintenance": {"minute": maintenance_minute, "jobs": maintenance},
        "end": {
            "corpora_sent": producer.sent,
            "producer_error": producer.error,
            "words_sent": corpus_words * producer.sent,
            "lag_at_end": remaining,
            "keys": len(expected),
            "keys_wrong": wrong,
            "exact": wrong == 0,
        },
    }
    result["summary"] = summarize(result)
    out = bench_common.results_dir("soak", "soak.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    plot(samples, out.with_name("soak.png"), maintenance_minute)
    print(json.dumps(result["summary"], indent=1))
    return 0 if wrong == 0 and remaining == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
