"""Phase `executors` of the rescale benchmark, on the local cluster: a store's stream moved to a
job with twice the executors and twice the shuffle partitions, ours against Spark's RocksDB
state store.

Per system, job 1 (one executor, 4 shuffle partitions) counts the fill (N distinct keys) and
stops; then a probe of existing keys is produced and job 2 (two executors, 8 shuffle partitions)
counts it. Ours: job 2 takes a new checkpoint with --recover-from-store (it needs nothing of job
1 but the store); its state stays in Cassandra. RocksDB: job 2 restarts from its checkpoint,
the only way to keep its state, and loads its state stores on the new executors. Job 3 (ours
only) continues job 2's checkpoint with 16 shuffle partitions: what Spark does to a changed
setting under an existing checkpoint, for our job too (`bucket_files_by_partitions`: the
apply-cache files the executors kept, one per shuffle partition, by the number of partitions).

Timed per job 2 (and 3): from the query's start to its first batch with input committed
(`first_batch_s`: ours from the job's own stream log, `restart_seconds`; RocksDB from its
progress events), and from spark-submit to that commit (`from_submit_s`, the same clock for both).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bench_common import PROJECT

from statestore.conn.spark import connector_jars

sys.path.insert(0, str(PROJECT / "stack"))
import cluster as local_cluster

# Spark's warning when a checkpoint's recorded setting overrides the session's: the shuffle
# partitions, or (Spark 4.1, stateful queries) spark.sql.streaming.internal.stateStore.partitions.
PINNED = re.compile(r".*Updating the value of conf '[\w.]*partitions'.*")
JOB = PROJECT / "jobs" / "wordcount_stream.py"
ROCKSDB_JOB = Path(__file__).with_name("rocksdb_job.py")
LOG_CONFIG = PROJECT / "statestore" / "conn" / "spark-log4j2.properties"


@dataclass(frozen=True)
class Submission:
    """One spark-submit to the standalone master."""

    script: Path
    args: tuple[str, ...]
    cores: int  # executors: the workers have one core each
    shuffle_partitions: int
    log: Path


@dataclass(frozen=True)
class Cluster:
    """Where the jobs run: the cluster's client settings, the shipped library, a work folder."""

    env: dict[str, str]
    library: Path
    workdir: Path


def fill_line(keys) -> bytes:
    """Ten (or fewer) state keys as one line: key i is 'k' and i in base 26 (the side by side's keys)."""
    words = []
    for i in keys:
        letters = ""
        for _ in range(5):
            i, digit = divmod(i, 26)
            letters = "abcdefghijklmnopqrstuvwxyz"[digit] + letters
        words.append("k" + letters)
    return " ".join(words).encode("ascii")


def submit(where: Cluster, job: Submission) -> tuple[int, float]:
    """Run a job to its end; (exit code, when it was submitted, epoch s)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_PYTHON", "STATESTORE_"))}
    env.update(
        where.env,
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    argv = [
        "spark-submit",
        *("--master", local_cluster.SPARK_MASTER_URL, "--total-executor-cores", str(job.cores)),
        *("--executor-memory", "768m", "--driver-memory", "768m"),
        *("--conf", f"spark.sql.shuffle.partitions={job.shuffle_partitions}"),
        *("--py-files", str(where.library), "--jars", ",".join(connector_jars())),
        *("--driver-java-options", f"-Dlog4j.configurationFile=file:{LOG_CONFIG}"),
        str(job.script),
        *job.args,
    ]
    submitted = time.time()
    with open(job.log, "w") as out:
        code = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=where.workdir, timeout=1200)
    return code.returncode, submitted


def _pinned(log: Path) -> str | None:
    found = PINNED.search(log.read_text(errors="replace"))
    return found.group(0).strip() if found else None


def _epoch_s(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _buckets_used(store: str, since: float) -> dict[str, int]:
    """Per worker, how many apply-cache buckets (Spark's hash partitions of the words, as many
    as the batch's shuffle partitions) this job's executors kept for `store`, by bucket count."""
    found: Counter = Counter()
    for path in local_cluster.CLUSTER.glob(f"spark-worker-*/work/app-*/*/statestore-apply-cache/*.{store}-*-*"):
        if path.stat().st_mtime >= since:
            found[path.name.rsplit("-", 2)[1]] += 1
    return dict(found)


def ours_job(where: Cluster, run: dict, name: str, cores: int, shuffle: int, *extra: str) -> dict:
    """Our job as an operator submits it; its first batch's time from the store's stream log."""
    from statestore.store.book import stream_log

    args = ("--topic", run["topic"], "--store", run["store"], "--keyspace", run["keyspace"], *extra)
    log = where.workdir / f"{name}.log"
    code, submitted = submit(where, Submission(JOB, args, cores, shuffle, log))
    if code != 0:
        raise SystemExit(f"{name} failed (exit {code}); see {log}")
    first = next(
        s for s in stream_log.recent_states(run["session"], run["keyspace"], run["store"]) if s.restart_seconds
    )
    batch = stream_log.recent_batches(run["session"], run["keyspace"], run["store"], limit=1)[0]
    return {
        "cores": cores,
        "shuffle_partitions_asked": shuffle,
        "first_batch_s": first.restart_seconds,
        "from_submit_s": round(first.at_ms / 1000 - submitted, 3),
        "batch_apply_s": batch.seconds,
        "bucket_files_by_partitions": _buckets_used(run["store"], submitted),
        "spark_pinned": _pinned(log),
        "log": log.name,
    }


def rocksdb_job(where: Cluster, run: dict, name: str, cores: int, shuffle: int) -> dict:
    """Spark's RocksDB word count from its one checkpoint; its first batch with input from its events."""
    events_file = where.workdir / f"{name}.json"
    args = ("--topic", run["topic"], "--checkpoint", str(run["rocksdb_checkpoint"]), "--events", str(events_file))
    log = where.workdir / f"{name}.log"
    code, submitted = submit(where, Submission(ROCKSDB_JOB, args, cores, shuffle, log))
    if code != 0:  # refused: keep what it said
        return {"cores": cores, "shuffle_partitions_asked": shuffle, "exit": code, "log_tail": log.read_text()[-2000:]}
    report = json.loads(events_file.read_text())
    batches = [e for e in report["events"] if e.get("numInputRows", 0) > 0]
    first = batches[0]
    committed = _epoch_s(first["timestamp"]) + first["durationMs"]["triggerExecution"] / 1000
    state = first["stateOperators"][0]
    return {
        "cores": cores,
        "shuffle_partitions_asked": shuffle,
        "first_batch_s": round(committed - report["started_ms"] / 1000, 3),
        "from_submit_s": round(committed - submitted, 3),
        "batch_s": first["durationMs"]["triggerExecution"] / 1000,
        "state_partitions_used": state.get("numShufflePartitions"),
        "session_shuffle_partitions": report["session_shuffle_partitions"],
        "state_rows": state.get("numRowsTotal"),
        "state_store_instances": state.get("numStateStoreInstances"),
        # Loading the state stores on the new executors (from the checkpoint's snapshots): RocksDB's own metrics.
        "rocksdb_load_ms": (state.get("customMetrics") or {}).get("rocksdbLoadLatencyMs"),
        "rocksdb_load_from_snapshot_ms": (state.get("customMetrics") or {}).get("rocksdbLoadFromSnapshotLatencyMs"),
        "spark_pinned": _pinned(log),
        "log": log.name,
    }


def _counts(session, keyspace: str, store: str) -> dict[str, int]:
    from statestore.core.codecs import decode_long, decode_text
    from statestore.store.book import registry
    from statestore.store.tables import table_for

    table = table_for(registry.lookup(session, keyspace, store))
    return {decode_text(e.key): decode_long(e.value) for e in table.scan_sorted(session)}


def one_round(where: Cluster, kafka, session, keyspace: str, keys: int, probe_lines: int, seed: int) -> dict:
    """Both systems through job 1 and job 2 on one topic (job 2s in an order set by `seed`)."""
    from statestore.conn import kafka as kafka_io

    tag = uuid.uuid4().hex[:6]
    run = {
        "topic": f"bench-rescale-{tag}",
        "store": f"rescale_{tag}",
        "keyspace": keyspace,
        "session": session,
        "rocksdb_checkpoint": where.workdir / f"rocksdb-cp-{tag}",
    }
    cp = where.workdir / f"ours-cp-{tag}"
    kafka_io.ensure_topic(kafka, run["topic"], 4)
    rng = random.Random(seed)
    fill = [fill_line(range(start, min(start + 10, keys))) for start in range(0, keys, 10)]
    probes = [[fill_line(rng.randrange(keys) for _ in range(10)) for _ in range(probe_lines)] for _ in range(2)]
    truth = Counter(word.decode() for line in fill + probes[0] for word in line.split())
    kafka_io.produce(kafka, run["topic"], iter(fill))
    out = {"topic": run["topic"], "keys": keys, "probe_words": probe_lines * 10}
    out["ours_job1"] = ours_job(where, run, f"ours-job1-{tag}", 1, 4, "--checkpoint", f"{cp}-1")
    out["rocksdb_job1"] = rocksdb_job(where, run, f"rocksdb-job1-{tag}", 1, 4)
    kafka_io.produce(kafka, run["topic"], iter(probes[0]))
    second = {
        "ours_job2": lambda: ours_job(
            where, run, f"ours-job2-{tag}", 2, 8, "--checkpoint", f"{cp}-2", "--recover-from-store"
        ),
        "rocksdb_job2": lambda: rocksdb_job(where, run, f"rocksdb-job2-{tag}", 2, 8),
    }
    order = sorted(second, reverse=seed % 2 == 1)
    out["order"] = order
    for name in order:
        out[name] = second[name]()
    out["ours_exact"] = _counts(session, keyspace, run["store"]) == dict(truth)
    out["rocksdb_state_rows_equal_keys"] = out["rocksdb_job2"].get("state_rows") == keys
    kafka_io.produce(kafka, run["topic"], iter(probes[1]))
    out["ours_job3_same_checkpoint"] = ours_job(where, run, f"ours-job3-{tag}", 2, 16, "--checkpoint", f"{cp}-2")
    truth.update(word.decode() for line in probes[1] for word in line.split())
    out["ours_exact_after_job3"] = _counts(session, keyspace, run["store"]) == dict(truth)
    from bench_common import delete_topics

    delete_topics(kafka, [run["topic"]])
    return out
