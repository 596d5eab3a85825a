"""Our job side by side with Spark's own state stores, on one generated corpus (BENCHMARKS.md).

One run generates a Zipf corpus, produces it once to one Kafka topic (recording partition,
offset, word count and timestamp of every message), then runs each system in its own
process (compare/worker.py; systems in compare/systems.py): throughput on the
corpus, latency at a fixed input rate, restart time by state size, and (our job) a profile.
It writes a Markdown report, the raw figures (JSON) and PNG plots to --out.

    make bench          # .venv/bin/python bench/streaming_compare/streaming_compare.py (5M words, 1M vocabulary)
    make bench-quick    # .venv/bin/python bench/streaming_compare/streaming_compare.py --quick
    make bench-aggregate  # ... --aggregate: JSON events, count, sum and max per user and per user
                          #     and minute, ours and Spark's
    .venv/bin/python bench/streaming_compare/streaming_compare.py --systems partitioned,rocksdb --rounds 3

Its parts are the package compare/ beside it; what every benchmark shares is bench/bench_common.py.
Needs the local stack (scripts/stack up); drops its keyspace and topics at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

# python puts this script's folder on the path (compare/); bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import bench_common as common
from compare.experiments import EXPERIMENTS
from compare.feed import produce_all, spread_timestamps
from compare.report import aggregate, render
from compare.systems import (
    AGGREGATED,
    BATCH_COUNTS_OF,
    COUNTERPARTS,
    OPTIONAL,
    OURS,
    REAL_JOB,
    STATEFUL,
    SYSTEMS,
    WINDOW_AGGREGATED,
    WINDOW_MS,
)

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
PROJECT = BENCH.parent
SCRIPT = Path(__file__).resolve().relative_to(PROJECT).as_posix()

_log = logging.getLogger("bench.streaming_compare")
FULL = {
    "words": 5_000_000,
    "vocab": 1_000_000,
    "batches": 10,
    "sizes": "10000,100000,1000000,10000000",
    "latency_seconds": 60.0,
    "latency_warmup": 10.0,
    "restart_repeats": 3,
    "profile": True,
    # .stack/bench-results/streaming_compare (git-ignored); bench/results/streaming_compare with
    # STATESTORE_BENCH_PUBLISH=1 (`make bench PUBLISH=1`): bench/README.md.
    "out": common.results_dir("streaming_compare"),
}
QUICK = {
    "words": 100_000,
    "vocab": 20_000,
    "batches": 5,
    "sizes": "10000,50000",
    "latency_seconds": 8.0,
    "latency_warmup": 2.0,
    "restart_repeats": 1,
    "profile": False,
    "out": PROJECT / "reports" / "bench-quick",
}
# `--timed` (make bench-timed): the key-value, windowed, hopping and session word counts, ours and
# Spark's on RocksDB, over a corpus of 2M words spanning an hour of event time (each of the ten
# batches six minutes of it); throughput only, two rounds.
# Each of ours that has a Spark counterpart, beside it and Spark counting each batch alone.
TIMED_SYSTEMS = tuple(
    name
    for ours, spark in COUNTERPARTS.items()
    if ours not in AGGREGATED
    for name in (ours, spark, BATCH_COUNTS_OF[ours])
)
TIMED_RUN = {
    "words": 2_000_000,
    "vocab": 500_000,
    "systems": ",".join(TIMED_SYSTEMS),
    "event_span": 3600.0,
    "phases": "throughput",
    "rounds": 2,
    "out": common.results_dir("timed_compare"),
}

# `--aggregate` (make bench-aggregate): JSON events (compare/events.py; --words events of --vocab
# Zipf users) aggregated per user, count, sum and max, ours into a key-value aggregate store beside
# Spark's groupBy(user).agg() on RocksDB, and the same per user and 1-minute window, ours into a
# window aggregate store beside Spark's groupBy(window(ts), user).agg(); throughput three rounds
# in alternating order (the machine's load moves single runs a lot), and one profiled run of each
# of ours (where its time goes). Each pair about ten minutes on two cores.
AGGREGATE_RUN = {
    "words": 2_400_000,
    "vocab": 300_000,
    "systems": ",".join(AGGREGATED),
    "phases": "throughput,profile",
    "rounds": 3,
    "profile": True,
    "out": common.results_dir("aggregate_compare"),
}


def _spark_setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.startswith("spark."):
        raise argparse.ArgumentTypeError(f"{text!r}: give a Spark setting as spark.KEY=VALUE")
    return key, value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small corpus, two state sizes, short latency run")
    p.add_argument(
        "--timed",
        action="store_true",
        help="windows, hopping windows and sessions beside key-value, ours and Spark's, over an hour of event "
        "time, throughput only, two rounds (make bench-timed; flags given override it)",
    )
    p.add_argument(
        "--aggregate",
        action="store_true",
        help="JSON events aggregated per user (count, sum, max) and per user and 1-minute window, ours beside "
        "Spark's groupBy().agg() on RocksDB, throughput three rounds and a profile (make bench-aggregate; flags "
        "given override it)",
    )
    p.add_argument(
        "--words", type=int, help="words of input (default 5,000,000; quick 100,000); --aggregate: events (2,400,000)"
    )
    p.add_argument(
        "--vocab", type=int, help="vocabulary size (default 1,000,000; quick 20,000); --aggregate: users (300,000)"
    )
    p.add_argument("--zipf-s", type=float, default=1.0, help="Zipf exponent of word frequencies (1.0)")
    p.add_argument("--words-per-line", type=int, default=10, help="mean words per Kafka message (10)")
    p.add_argument("--batches", type=int, help="micro-batches of the corpus, via maxOffsetsPerTrigger (10; quick 5)")
    p.add_argument(
        "--systems",
        help=f"comma-separated, of {', '.join(SYSTEMS)} (default: all but {', '.join(OPTIONAL)})",
    )
    p.add_argument("--rounds", type=int, help="throughput runs per system, order alternating (1; timed 2)")
    p.add_argument(
        "--sizes",
        help="state sizes for the restart times (10000,100000,1000000,10000000; quick 10000,50000); sizes over "
        f"{LARGE_STATE:,} only for {', '.join(LARGE_STATE_SYSTEMS)}",
    )
    p.add_argument(
        "--cold-restart",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also restart in new SparkSessions, as often as warm (nothing of the executor left; default on)",
    )
    p.add_argument(
        "--restart-repeats",
        type=int,
        help="restarts per state size, warm and cold alike; the median counts (3; quick 1)",
    )
    p.add_argument("--probe-words", type=int, default=1000, help="words of the batch after each restart (1000)")
    p.add_argument("--rate", type=float, default=5_000.0, help="input rate of the latency runs, words/s (5,000)")
    p.add_argument("--latency-seconds", type=float, help="how long the latency runs feed input (60; quick 8)")
    p.add_argument("--latency-warmup", type=float, help="seconds of input left out of the latencies (10; quick 2)")
    p.add_argument("--trigger", default="1s", help="processing-time trigger of the latency runs (1s)")
    p.add_argument("--profile", action=argparse.BooleanOptionalAction, help="profile our job (full run: on)")
    p.add_argument("--phases", help="only these phases of throughput,latency,restart,profile (default all)")
    p.add_argument(
        "--experiment",
        action="append",
        default=[],
        choices=sorted(EXPERIMENTS),
        help="a change to our job to try out (bench/compare/experiments.py); repeatable",
    )
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        type=_spark_setting,
        metavar="KEY=VALUE",
        help="a Spark setting for every system's session, over the shared ones; repeatable",
    )
    p.add_argument(
        "--driver-apply-records",
        type=int,
        help="our job's --driver-apply-records: batches of at most this many records applied by the driver "
        "(default: the job's, 1000; 0: every batch on the executors)",
    )
    p.add_argument(
        "--event-span",
        type=float,
        help="seconds of event time the corpus spans, in produce order, ending a minute ago (0: each message "
        "stamped by the producer's clock, the corpus spans its produce time); make bench-timed: 3600",
    )
    p.add_argument("--partitions", type=int, default=4, help="Kafka topic partitions (4)")
    p.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    p.add_argument("--shuffle-partitions", type=int, default=4, help="spark.sql.shuffle.partitions (4)")
    p.add_argument("--driver-memory", default="2g", help="spark.driver.memory of every system (2g)")
    p.add_argument("--seed", type=int, default=20260415, help="corpus seed")
    p.add_argument("--run-timeout", type=float, default=3600, help="seconds one streaming run may take")
    p.add_argument(
        "--out",
        type=Path,
        help="report directory (.stack/bench-results/streaming_compare, published: bench/results/streaming_compare;"
        " quick: reports/bench-quick)",
    )
    p.add_argument("--keep", action="store_true", help="keep the keyspace, topics and work files")
    p.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help="no uncounted throughput run of the first of ours before the rounds (warm_up)",
    )
    args = p.parse_args(argv)
    defaults = {
        "systems": ",".join(s for s in SYSTEMS if s not in OPTIONAL),
        "rounds": 1,
        "event_span": 0.0,
        **(QUICK if args.quick else FULL),
        **(TIMED_RUN if args.timed else {}),
        **(AGGREGATE_RUN if args.aggregate else {}),
    }
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(args.systems) - set(SYSTEMS)
    if unknown:
        p.error(f"unknown systems {sorted(unknown)}; use {', '.join(SYSTEMS)}")
    args.sizes = sorted(int(s) for s in args.sizes.split(","))
    args.phases = [s.strip() for s in args.phases.split(",")] if args.phases else None
    if args.phases and set(args.phases) - set(PHASES):
        p.error(f"unknown phases {sorted(set(args.phases) - set(PHASES))}; use {', '.join(PHASES)}")
    if args.aggregate and args.timed:
        p.error("--aggregate and --timed are runs of their own: give one")
    mixed = {s in AGGREGATED for s in args.systems}
    if len(mixed) > 1:
        p.error(f"{', '.join(AGGREGATED)} read JSON events, the others text lines: run them apart (--aggregate)")
    if mixed == {True} and not args.aggregate:
        p.error(f"{', '.join(AGGREGATED)} read JSON events: add --aggregate")
    return args


PHASES = ("throughput", "latency", "restart", "profile")
# State sizes above LARGE_STATE are filled only for these: the global store fills 1M keys in
# minutes and the HDFS-backed provider keeps its whole state in the driver's 2 GiB heap.
LARGE_STATE = 1_000_000
LARGE_STATE_SYSTEMS = ("partitioned", "rocksdb")


def restart_sizes(system: str, sizes: list[int]) -> list[int]:
    return [s for s in sizes if s <= LARGE_STATE or system in LARGE_STATE_SYSTEMS]


def phases_of(system: str, round_no: int, profile: bool, only: list[str] | None = None) -> list[str]:
    """Every phase that applies to the system in the first round (restart: stateful systems;
    profile: our job, when asked); later rounds repeat only the throughput run."""
    phases = ["throughput"] if round_no > 1 else ["throughput", "latency"]
    if round_no == 1 and system in STATEFUL:
        phases.append("restart")
    if round_no == 1 and profile and system in REAL_JOB:
        phases.append("profile")
    return [p for p in phases if only is None or p in only]


def warm_up(base: dict, system: str, workdir: Path) -> dict:
    """One throughput run of `system` before the rounds, not counted: the first of ours timed
    after the stack started cost Cassandra about twice the CPU of the same run later (14.5 s
    against 6.5 in the key-value store's two rounds), which a million rows written and read
    beforehand did not prevent. What it ran and how it went, for the raw report."""
    sysdir = workdir / f"{system}-warmup"
    sysdir.mkdir()
    plan = {**base, "system": system, "round": 0, "workdir": str(sysdir), "phases": ["throughput"]}
    plan["restart"] = {**base["restart"], "sizes": []}
    _log.info("warm-up: %s (throughput, not counted)", system)
    result = run_worker(plan, workdir)
    run = result.get("throughput") or {}
    return {
        "system": system,
        "words_per_s": run.get("sustained_words_per_s"),
        "cassandra_cpu_s": run.get("cassandra_cpu_s"),
        "wall_s": result["load"]["wall_s"],
        "error": result.get("error"),
    }


def run_worker(plan: dict, workdir: Path) -> dict:
    """One system's phases in a fresh process; its figures, with the machine's load around it."""
    stem = f"{plan['system']}-{plan['round']}"
    plan_file, out_file = workdir / f"{stem}.plan.json", workdir / f"{stem}.out.json"
    plan_file.write_text(json.dumps(plan))
    kafka_pid = common.stack_pid("kafka")
    before = _load_sample(kafka_pid)
    began = time.perf_counter()
    # The worker imports its parts as this script does: compare/ from this script's folder,
    # bench_common from bench/, both on its PYTHONPATH; the working directory as it is.
    path = (str(HERE), str(BENCH), os.environ.get("PYTHONPATH"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    completed = subprocess.run(
        [sys.executable, "-m", "compare.worker", str(plan_file), str(out_file)],
        env=env,
        timeout=plan["run_timeout_s"] * 4,
        check=False,
    )
    load = _load_delta(before, _load_sample(kafka_pid), time.perf_counter() - began)
    result = json.loads(out_file.read_text()) if out_file.exists() else {"system": plan["system"]}
    if completed.returncode != 0:
        result["error"] = f"worker exited with {completed.returncode} (its log is above)"
    result["load"] = load
    return result


def _load_sample(kafka_pid) -> dict:
    children = os.times()
    return {
        "loadavg": os.getloadavg()[0],
        "machine": common.machine_ticks()[0],
        "ours": children.children_user + children.children_system,
        "cassandra": common.cpu_ticks_of(common.cassandra_pid()),
        "kafka": common.cpu_ticks_of(kafka_pid),
    }


def _load_delta(before: dict, after: dict, wall_s: float) -> dict:
    """Load during a worker: the machine's busy cores, and what of it was not this benchmark
    (other sessions' tests): busy - the worker's process tree - our Cassandra and Kafka."""
    hz = os.sysconf("SC_CLK_TCK")
    busy = (after["machine"] - before["machine"]) / hz
    ours = (
        after["ours"]
        - before["ours"]
        + (after["cassandra"] - before["cassandra"] + after["kafka"] - before["kafka"]) / hz
    )
    return {
        "wall_s": wall_s,
        "loadavg": [before["loadavg"], after["loadavg"]],
        "busy_cores": busy / wall_s,
        "other_cores": max(busy - ours, 0.0) / wall_s,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("cassandra", "statestore", "bench.kafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from statestore.conn import kafka as kafka_io
    from statestore.conn.cassandra import close_all, create_keyspace, session_for
    from statestore.core import config as cfg
    from statestore.core.config import CassandraConfig, KafkaConfig

    tag = uuid.uuid4().hex[:8]
    keyspace, topic = f"bench_cmp_{tag}", f"bench-cmp-{tag}"
    cassandra = cfg.resolve(CassandraConfig, overrides={"keyspace": keyspace})
    kafka = cfg.resolve(KafkaConfig)
    workdir = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    script_began = time.perf_counter()
    t = time.perf_counter()
    lines, words, truth, corpus = make_corpus(args)
    (workdir / "corpus.lines").write_bytes(b"\n".join(lines))
    (workdir / "corpus.words.json").write_text(json.dumps(words))
    (workdir / "truth.json").write_text(json.dumps(truth))
    if any(system in WINDOW_AGGREGATED for system in args.systems):
        from compare.events import window_truth_of, window_truth_to_json

        windows = window_truth_of(lines, WINDOW_MS)
        (workdir / "window_truth.json").write_text(json.dumps(window_truth_to_json(windows)))
        corpus.update(window_s=WINDOW_MS // 1000, user_windows=len(windows))
        del windows
    # Spark shares the cap among the partitions and rounds down: a little slack keeps the
    # last batch from being a sliver.
    max_offsets = math.ceil(len(lines) / args.batches) + args.partitions
    _log.info(
        "corpus: %d words in %d records, %d distinct keys (%.1fs)",
        corpus["words"],
        len(lines),
        len(truth),
        time.perf_counter() - t,
    )
    common.wait_for_stack(cassandra, kafka, 300)
    session = session_for(cassandra)
    topics = [topic] + [f"{tag}-{kind}-{s}" for s in args.systems for kind in ("lat", "rs")]
    results: list[dict] = []
    try:
        create_keyspace(session, keyspace)
        kafka_io.ensure_topic(kafka, topic, args.partitions)
        t = time.perf_counter()
        stamps = None
        if args.event_span > 0:
            # Kafka 4 refuses timestamps an hour ahead of its clock, not behind it.
            stamps = spread_timestamps(len(lines), int(args.event_span * 1000), int(time.time() * 1000) - 60_000)
            corpus["event_span_s"] = args.event_span
        # Round-robin over the partitions when the records are stamped with an event time or
        # carry one (the aggregate run's JSON): batches then read the partitions in step, and no
        # record falls behind a window's grace.
        spread = args.partitions if stamps is not None or args.aggregate else None
        index = produce_all(kafka.bootstrap_servers, topic, lines, words, stamps, spread)
        (workdir / "corpus.index.json").write_text(json.dumps(index.to_json()))
        corpus["produce_s"] = time.perf_counter() - t
        del lines, index
        base = {
            "tag": tag,
            "keyspace": keyspace,
            "corpus_topic": topic,
            "corpus_index": str(workdir / "corpus.index.json"),
            "corpus_lines": str(workdir / "corpus.lines"),
            "corpus_words": str(workdir / "corpus.words.json"),
            "truth": str(workdir / "truth.json"),
            "window_truth": str(workdir / "window_truth.json"),
            "max_offsets": max_offsets,
            "batches": args.batches,
            "partitions": args.partitions,
            "master": args.master,
            "shuffle_partitions": args.shuffle_partitions,
            "driver_memory": args.driver_memory,
            "run_timeout_s": args.run_timeout,
            "latency": {
                "rate": args.rate,
                "seconds": args.latency_seconds,
                "warmup_s": args.latency_warmup,
                "trigger": args.trigger,
                "drain_s": 60,
            },
            "restart": {
                "sizes": args.sizes,
                "repeats": args.restart_repeats,
                "probe_words": args.probe_words,
                "cold": args.cold_restart,
            },
            "experiments": args.experiment,
            "spark_conf": dict(args.spark_conf),
            "driver_apply_records": args.driver_apply_records,
        }
        warm = next((system for system in args.systems if system in OURS), None)
        if warm is not None and args.warmup:
            corpus["warmup"] = warm_up(base, warm, workdir)
        for round_no in range(1, args.rounds + 1):
            order = args.systems if round_no % 2 else list(reversed(args.systems))
            for system in order:
                sysdir = workdir / f"{system}-{round_no}"
                sysdir.mkdir()
                plan = {**base, "system": system, "round": round_no, "workdir": str(sysdir)}
                plan["phases"] = phases_of(system, round_no, args.profile, args.phases)
                plan["restart"] = {**base["restart"], "sizes": restart_sizes(system, args.sizes)}
                _log.info("round %d: %s (%s)", round_no, system, ", ".join(plan["phases"]))
                results.append(run_worker(plan, workdir))
        machine = common.machine_description(results[0].get("spark_version"), session)
        summary = aggregate(results, args.systems)
        settings = {
            "max_offsets_per_trigger": max_offsets,
            "command": " ".join([SCRIPT, *(argv if argv is not None else sys.argv[1:])]),
            "script_s": time.perf_counter() - script_began,
            **{k: str(v) for k, v in vars(args).items()},
        }
        write_report(args.out, machine, corpus, settings, summary, results)
        print(f"\nreport: {args.out / 'streaming_compare.md'} ({time.perf_counter() - script_began:.0f} s in all)")
        return 0 if not any("error" in r for r in results) else 1
    finally:
        if not args.keep:
            common.drop_keyspace(session, keyspace, cassandra, kafka)
            common.delete_topics(kafka, [t for t in topics if kafka_io.partition_count(kafka, t) is not None])
            shutil.rmtree(workdir, ignore_errors=True)
        close_all()


def make_corpus(args) -> tuple[list[bytes], list[int], dict, dict]:
    """The run's Kafka records, the words of each (an event: one), the ground truth as JSON and
    what the report says of the corpus: text lines of Zipf words, or (--aggregate) JSON events
    of Zipf users, whose truth is each user's (count, sum, max)."""
    if args.aggregate:
        from compare.events import generate_events, truth_to_json

        lines, truth = generate_events(args.words, args.vocab, args.zipf_s, args.seed)
        corpus = {
            "events": len(lines),
            "words": len(lines),  # one record, one event: the report's words/s are events/s
            "lines": len(lines),
            "users": args.vocab,
            "distinct_users": len(truth),
            "zipf_s": args.zipf_s,
            "top_users_for_half": common.zipf_rank_of(args.vocab, args.zipf_s, 0.5),
            "seed": args.seed,
        }
        return lines, [1] * len(lines), truth_to_json(truth), corpus
    lines, words, truth = common.generate_with_counts(
        args.words, args.vocab, args.zipf_s, args.words_per_line, args.seed
    )
    corpus = {
        "words": sum(words),
        "lines": len(lines),
        "vocabulary": args.vocab,
        "distinct_words": len(truth),
        "zipf_s": args.zipf_s,
        "top_words_for_half": common.zipf_rank_of(args.vocab, args.zipf_s, 0.5),
        "seed": args.seed,
    }
    return lines, words, truth, corpus


def write_report(out: Path, machine: dict, corpus: dict, settings: dict, summary: dict, results: list[dict]) -> None:
    from compare.plots import plot_all

    out.mkdir(parents=True, exist_ok=True)
    pngs = plot_all(summary, out)
    (out / "streaming_compare.md").write_text(render(machine, corpus, settings, summary, pngs))
    raw = {"machine": machine, "corpus": corpus, "settings": settings, "summary": summary, "runs": results}
    (out / "streaming_compare.json").write_text(json.dumps(raw, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
