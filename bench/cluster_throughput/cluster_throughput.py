"""The same corpus counted on the single-node stack (Spark local[2]) and on the local cluster
(3 Cassandra nodes at RF 3, 3 brokers at RF 3, Spark standalone with 2 one-core workers), one
after the other in one run; where the time goes (CPU of Cassandra, Kafka and Spark processes).

    python bench/cluster_throughput/cluster_throughput.py [--words 1000000]

Needs both stacks up (`scripts/stack up` and `scripts/stack up --nodes 3`). Every figure is
written to .stack/bench-results/cluster_throughput/cluster_throughput.json (published with
STATESTORE_BENCH_PUBLISH=1: bench/results/cluster_throughput/; bench/README.md) and printed as a
Markdown table for BENCHMARKS.md. Counts are checked exactly against the corpus' truth on both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import bench_common
from bench_common import PROJECT, generate, process_tree_ticks

from statestore.conn import kafka as kafka_io
from statestore.conn.cassandra import DDL_PROFILE, close_all, create_keyspace, session_for
from statestore.conn.spark import connector_jars, library_archive
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.model import Replication

sys.path.insert(0, str(PROJECT / "stack"))
import cluster as local_cluster

import stack as local_stack

TICKS = os.sysconf("SC_CLK_TCK")
BATCH = re.compile(r"batch \d+ .*?, ([0-9.]+)s$")


def _submit(mode: str, env: dict[str, str], args: list[str], log: Path, library: Path) -> subprocess.Popen:
    if mode == "single":
        master = ["--master", "local[2]", "--driver-memory", "1g"]
    else:
        master = ["--master", local_cluster.SPARK_MASTER_URL, "--total-executor-cores", "2"]
        master += ["--executor-memory", "768m", "--driver-memory", "768m", "--py-files", str(library)]
    argv = [
        "spark-submit",
        *master,
        *("--jars", ",".join(connector_jars())),
        "--driver-java-options",
        f"-Dlog4j.configurationFile=file:{PROJECT / 'statestore' / 'conn' / 'spark-log4j2.properties'}",
        str(PROJECT / "jobs" / "wordcount_stream.py"),
        *args,
    ]
    return subprocess.Popen(argv, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)


def _processes(mode: str) -> dict[str, list[int]]:
    if mode == "single":
        return {kind: [local_stack.running_pid(kind)] for kind in ("cassandra", "kafka")}
    found: dict[str, list[int]] = {}
    for member in local_cluster.members():
        kind = "spark daemons" if member.kind.startswith("spark") else member.kind
        found.setdefault(kind, []).append(local_stack.running_pid(member.name))
    return found


def run(mode: str, lines: list[bytes], truth, partitions: int, workdir: Path, library: Path) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("STATESTORE_", "PYSPARK_PYTHON"))}
    settings = local_cluster.connection_env() if mode == "cluster" else local_stack.single_connection_env()
    env = {**base, **settings, "PATH": f"{Path(sys.executable).parent}:{base['PATH']}"}
    if mode == "cluster":
        env |= {"PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    keyspace = f"bench_{mode}_{uuid.uuid4().hex[:6]}"
    cassandra = cfg.resolve(CassandraConfig, env=settings, overrides={"keyspace": keyspace})
    kafka = cfg.resolve(KafkaConfig, env=settings)
    session = session_for(cassandra)
    replication = Replication.network(["dc1:3"]) if mode == "cluster" else Replication(1)
    create_keyspace(session, keyspace, replication)
    topic = f"bench-{mode}-{uuid.uuid4().hex[:6]}"
    kafka_io.ensure_topic(kafka, topic, partitions)
    kafka_io.produce(kafka, topic, iter(lines))
    store = "words"
    log = workdir / f"{mode}.log"
    checkpoint = workdir / f"{mode}-cp-{uuid.uuid4().hex[:6]}"  # new: the topic and keyspace are new
    args = ["--topic", topic, "--store", store, "--checkpoint", str(checkpoint), "--keyspace", keyspace]
    processes = _processes(mode)
    before = {kind: sum(process_tree_ticks(p) for p in pids) for kind, pids in processes.items()}
    started = time.monotonic()
    job = _submit(mode, env, args, log, library)
    job_ticks = 0
    while job.poll() is None:
        job_ticks = max(job_ticks, process_tree_ticks(job.pid))
        time.sleep(0.5)
    wall = time.monotonic() - started
    if job.returncode != 0:
        raise SystemExit(f"{mode}: the job failed; see {log}")
    after = {kind: sum(process_tree_ticks(p) for p in pids) for kind, pids in processes.items()}
    batches = [float(m.group(1)) for m in map(BATCH.search, log.read_text().splitlines()) if m]
    from statestore.core.codecs import decode_long, decode_text
    from statestore.store.book import registry
    from statestore.store.tables import table_for

    table = table_for(registry.lookup(session, keyspace, store))
    counted = {decode_text(e.key): decode_long(e.value) for e in table.scan_sorted(session)}
    exact = counted == dict(truth)
    session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", execution_profile=DDL_PROFILE, timeout=120)
    bench_common.delete_topics(kafka, [topic])
    shutil.rmtree(checkpoint, ignore_errors=True)
    close_all()
    words = sum(truth.values())
    cpu = {kind: round((after[kind] - before[kind]) / TICKS, 1) for kind in processes}
    cpu["spark job (driver; local mode: executors too)"] = round(job_ticks / TICKS, 1)
    return {
        "mode": mode,
        "words": words,
        "batches": len(batches),
        "processing_s": round(sum(batches), 1),
        "wall_s": round(wall, 1),
        "words_per_s_processing": round(words / sum(batches)) if batches else None,
        "words_per_s_wall": round(words / wall),
        "cpu_s": cpu,
        "exact": exact,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=1_000_000)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    lines, truth = generate(args.words, args.vocab, 1.1, 12, seed=2026)
    workdir = PROJECT / ".stack" / "bench" / "cluster_throughput"
    workdir.mkdir(parents=True, exist_ok=True)
    library = library_archive(workdir / "statestore.zip")
    results = [run(mode, lines, truth, args.partitions, workdir, library) for mode in ("single", "cluster")]
    out = bench_common.results_dir("cluster_throughput", "cluster_throughput.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": bench_common.machine_description(), "runs": results}, indent=2) + "\n")
    print("| | words | batches | processing s | words/s (processing) | wall s | exact | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        cpu = ", ".join(f"{k} {v}" for k, v in r["cpu_s"].items())
        print(
            f"| {r['mode']} | {r['words']:,} | {r['batches']} | {r['processing_s']} | "
            f"{r['words_per_s_processing']:,} | {r['wall_s']} | {r['exact']} | {cpu} |"
        )
    return 0 if all(r["exact"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
