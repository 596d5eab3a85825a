"""What the replay-safety machinery costs: the word count with and without it, side by side.

One run of this script generates one input (a fixed seed, a Zipf-like vocabulary), produces
it to one Kafka topic, and streams it several times, each into a fresh store with a fresh
checkpoint, in ONE SparkSession (so Spark's start-up is paid once, outside every timing):

  replay-safe   the real job (statestore.stream.job.start): read the current rows, skip the
                ones this batch already wrote, write absolute values USING TIMESTAMP;
                partitioned-kv store.
  counter       the same job without replay safety: same Kafka read, same tokenization and
                aggregation (batch_deltas), same foreachBatch (lease check, registry
                bookkeeping, dead letters), but the executor-side apply is swapped for blind
                counter increments (UPDATE ... SET value = value + ?) on a counter table of the
                same layout (PRIMARY KEY ((partition), key)), grouped per partition into
                batches exactly as the store groups its writes, with the same concurrency.
                Done through the job's seam for it (BatchSeams.make_applier; replay/counter.py).
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
planning, writes; with accumulators), through the job's seams (BatchSeams.driver_timer and
task_timer, replay/seams.py).

The stack may be shared: the script waits for Cassandra and Kafka to answer before each run,
recreates its keyspace or topic if someone reset them, and repeats a run that failed (a
timed-out counter write cannot be retried in place: increments are not idempotent).

    .venv/bin/python bench/replay_overhead/replay_overhead.py       # defaults: 1M words, 4 rounds
    .venv/bin/python bench/replay_overhead/replay_overhead.py --words 200000 --rounds 2 --no-profile   # quick
    .venv/bin/python bench/replay_overhead/replay_overhead.py --variants replay-safe,counter,global --rounds 1

Its parts are the package replay/ beside it; what every benchmark shares is bench/bench_common.py.
Needs the local stack (scripts/stack up). Cleans up its keyspace and topics at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from pathlib import Path

# python puts this script's folder on the path (replay/); bench/ holds bench_common.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from bench_common import (
    delete_topics,
    drop_keyspace,
    generate,
    machine_description,
    results_dir,
    wait_for_stack,
    zipf_rank_of,
)
from replay import VARIANTS, counter
from replay.report import markdown, summarize
from replay.runs import Bench, RunResult

from statestore.conn.cassandra import close_all, session_for
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig

_log = logging.getLogger("bench.replay_overhead")


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
    p.add_argument(
        "--json",
        type=Path,
        default=results_dir("replay_overhead", "replay_overhead.json"),
        help="write every run's numbers here (.stack/bench-results/replay_overhead/; published: bench/results/...)",
    )
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

    from statestore.conn.spark import build_session

    # The counter baseline's apply runs on the executors, whose Python workers do not have
    # bench/ on their path: ship its module by value. (The real apply and its timer are
    # statestore's own, which the workers import.)
    cloudpickle.register_pickle_by_value(counter)

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
            args.json.parent.mkdir(parents=True, exist_ok=True)
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
