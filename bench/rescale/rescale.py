"""Rescaling without a restore (issue 32): partitions added to the topic under a running stream,
and a store's stream moved to a job with twice the executors and shuffle partitions, against
Spark's RocksDB state store doing the same from its checkpoint.

    python bench/rescale/rescale.py [--phases added,executors] [--keys 300000] [--rounds 2]

`added` (added_partitions.py) needs the single-node stack (`make stack-up`) and runs Spark
local[2] in this process; `executors` (executors.py) needs the local cluster (`scripts/stack up
--nodes 3`) to itself: it submits jobs with one and two executors to its two one-core workers.
Every figure goes to .stack/bench-results/rescale/rescale.json (published with
STATESTORE_BENCH_PUBLISH=1: bench/results/rescale/; bench/README.md), with the Spark driver logs
of the executors phase beside it under logs/ (what Spark said about the shuffle partitions is
quoted in the JSON too). Counts are checked exactly; a run whose counts are wrong exits 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import bench_common
from bench_common import PROJECT


def _load() -> float:
    return os.getloadavg()[0]


def added_phase(args, workdir: Path) -> dict:
    import added_partitions

    from statestore.conn.spark import build_session
    from statestore.core import config as cfg
    from statestore.core.config import KafkaConfig

    spark = build_session("bench-rescale", master="local[2]", conf={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("WARN")
    kafka = cfg.resolve(KafkaConfig)
    try:
        with bench_common.scratch_keyspace(f"bench_added_{uuid.uuid4().hex[:6]}") as (cassandra, _):
            result = added_partitions.run(
                spark, cassandra, kafka, workdir, args.keys, args.added_rounds, args.step, seed=3210
            )
    finally:
        spark.stop()
    times = [r["to_first_counted_s"] for r in result["rounds"]]
    result["median_to_first_counted_s"] = round(statistics.median(times), 3)
    return result


def executors_phase(args, workdir: Path) -> dict:
    import executors

    from statestore.conn.cassandra import DDL_PROFILE, close_all, create_keyspace, session_for
    from statestore.conn.spark import library_archive
    from statestore.core import config as cfg
    from statestore.core.config import CassandraConfig, KafkaConfig
    from statestore.core.model import Replication

    env = executors.local_cluster.connection_env()
    keyspace = f"bench_rescale_{uuid.uuid4().hex[:6]}"
    cassandra = cfg.resolve(CassandraConfig, env=env, overrides={"keyspace": keyspace})
    kafka = cfg.resolve(KafkaConfig, env=env)
    session = session_for(cassandra)
    create_keyspace(session, keyspace, Replication.network(["dc1:3"]))
    where = executors.Cluster(env, library_archive(workdir / "statestore.zip"), workdir)
    rounds = []
    try:
        for number in range(args.rounds):
            rounds.append(executors.one_round(where, kafka, session, keyspace, args.keys, args.probe_lines, number))
            logging.info("round %d: %s", number + 1, json.dumps(rounds[-1], default=str)[:2000])
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", execution_profile=DDL_PROFILE, timeout=120)
        close_all()
    summary = {}
    for job in ("ours_job2", "rocksdb_job2", "ours_job3_same_checkpoint"):
        for measure in ("first_batch_s", "from_submit_s"):
            values = [r[job][measure] for r in rounds if measure in r[job]]
            summary.setdefault(job, {})[measure] = round(statistics.median(values), 3) if values else None
    for measure in ("first_batch_s", "from_submit_s"):
        ours, theirs = summary["ours_job2"][measure], summary["rocksdb_job2"][measure]
        summary[f"x_rocksdb_{measure}"] = round(ours / theirs, 3) if ours and theirs else None
        summary[f"runs_x_rocksdb_{measure}"] = [
            round(r["ours_job2"][measure] / r["rocksdb_job2"][measure], 3)
            for r in rounds
            if r["rocksdb_job2"].get(measure)
        ]
    summary["rocksdb_state_partitions_used"] = [r["rocksdb_job2"].get("state_partitions_used") for r in rounds]
    summary["rocksdb_spark_said"] = rounds[0]["rocksdb_job2"].get("spark_pinned")
    summary["ours_job3_spark_said"] = rounds[0]["ours_job3_same_checkpoint"].get("spark_pinned")
    summary["ours_job2_spark_said"] = rounds[0]["ours_job2"].get("spark_pinned")
    return {"rounds": rounds, "summary": summary}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phases", default="added,executors")
    parser.add_argument("--keys", type=int, default=300_000, help="distinct keys in the state before the rescale")
    parser.add_argument("--rounds", type=int, default=2, help="executors phase: rounds (job 2s alternate order)")
    parser.add_argument("--probe-lines", type=int, default=2_000, help="executors phase: lines of 10 keys after job 1")
    parser.add_argument("--added-rounds", type=int, default=3, help="added phase: times partitions are added")
    parser.add_argument("--step", type=int, default=2, help="added phase: partitions added each time")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    out = args.out or bench_common.results_dir("rescale", "rescale.json")
    workdir = PROJECT / ".stack" / "bench" / "rescale" / uuid.uuid4().hex[:6]
    workdir.mkdir(parents=True, exist_ok=True)
    phases = args.phases.split(",")
    began, load_before = time.monotonic(), _load()
    report: dict = {"command": " ".join(sys.argv), "machine": bench_common.machine_description()}
    if "added" in phases:
        report["added"] = added_phase(args, workdir)
    if "executors" in phases:
        report["executors"] = executors_phase(args, workdir)
    report["settings"] = {
        **{k: v for k, v in vars(args).items() if k != "out"},
        "script_s": round(time.monotonic() - began, 1),
        "load_average_1m": {"before": round(load_before, 2), "after": round(_load(), 2)},
        "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    logs = out.parent / "logs"
    for log in workdir.glob("*.log"):
        logs.mkdir(exist_ok=True)
        shutil.copy(log, logs / log.name)
    print(json.dumps({k: report[k].get("summary", report[k]) for k in ("added", "executors") if k in report}, indent=2))
    exact = [report["added"]["exact"]] if "added" in report else []
    for r in report.get("executors", {}).get("rounds", []):
        exact += [r["ours_exact"], r["ours_exact_after_job3"], r["rocksdb_state_rows_equal_keys"]]
    return 0 if all(exact) else 1


if __name__ == "__main__":
    sys.exit(main())
