"""What the aggregate job's Spark side costs per batch beside Spark's own groupBy().agg(), on
one static batch of Kafka-like rows in local[2] (no services): the CPU seconds of the Spark JVM
and of its Python workers, for

- `ours`: the job's input stage and partials (statestore.stream.json_input.parsed_records on
  the batch with its future limit, statestore.stream.aggregates.partials with the apply
  cache's buckets) crossing to a no-op mapInArrow consumer, as run_on_executors does;
- `spark`: Spark's own shape of make bench-aggregate (try_parse_json, two variant_gets,
  groupBy(user).agg(count, sum, max)) to the noop sink;
- `ours@REF` (with --baseline REF): `ours` with json_input.py as git holds it at REF, to
  measure a change of the input stage before and after in one run.

The batch is make bench-aggregate's events (compare.events: Zipf users, `{"user":...,
"amount":...,"ts":...}`), as rows (topic, partition, offset, value, timestamp) of four
partitions, cached in memory before the rounds. Every variant runs once to warm up, then
`--rounds` times in alternating order; the medians are reported. `--plans DIR` writes each
variant's physical plan (explain "formatted"). Both sides' results are checked equal.

    nice .venv/bin/python bench/micro/aggregate_stage.py [--events 500000] [--rounds 3] \
        [--baseline HEAD] [--plans DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

# python puts only this script's folder on the path; bench/ holds bench_common, and the
# streaming comparison's folder its events (compare.events).
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "streaming_compare"))

from bench_common import PROJECT, process_tree_ticks_by_kind
from compare.events import AMOUNT_FIELD, KEY_FIELD, MEASURES, TIME_FIELD, generate_events

PARTITIONS = 4  # the benchmark's topic, and the job's shuffle partitions (apply-cache buckets)
TICKS = os.sysconf("SC_CLK_TCK")


def _corpus(spark, events: int, users: int, seed: int, folder: Path):
    """The events as a cached DataFrame of Kafka rows, PARTITIONS partitions, round-robin."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines, truth = generate_events(events, users, 1.0, seed)
    start = datetime(2026, 11, 29, tzinfo=UTC)
    for p in range(PARTITIONS):
        values = lines[p::PARTITIONS]
        table = pa.table(
            {
                "key": pa.nulls(len(values), pa.binary()),
                "value": pa.array(values, pa.binary()),
                "topic": pa.array(["events"] * len(values)),
                "partition": pa.array([p] * len(values), pa.int32()),
                "offset": pa.array(range(len(values)), pa.int64()),
                "timestamp": pa.array([start] * len(values), pa.timestamp("us", tz="UTC")),
                "timestampType": pa.array([0] * len(values), pa.int32()),
            }
        )
        pq.write_table(table, folder / f"part-{p}.parquet")
    df = spark.read.parquet(str(folder)).repartition(PARTITIONS, "partition").cache()
    df.count()
    return df, truth


def _json_input_at(ref: str):
    """statestore.stream.json_input as git holds it at `ref`, loaded as a module of its own."""
    text = subprocess.run(
        ["git", "show", f"{ref}:statestore/stream/json_input.py"],
        cwd=PROJECT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "json_input_baseline.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("json_input_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _ours(source, parse_module):
    from statestore.core.aggregation import AggregateSpec
    from statestore.stream import aggregates
    from statestore.stream.transforms import with_future_limit

    spec = parse_module.JsonInput(AggregateSpec.parse(MEASURES), (KEY_FIELD,), time_field=TIME_FIELD)
    now_ms = int(time.time() * 1000)
    batch = with_future_limit(source, now_ms * 1000, 300_000)
    return aggregates.partials(parse_module.parsed_records(batch, spec), spec, PARTITIONS)


def _spark(source):
    from pyspark.sql import functions as F

    record = F.expr("try_parse_json(CAST(value AS STRING))").alias("record")
    fields = source.select(record).select(
        F.expr(f"variant_get(record, '$.{KEY_FIELD}', 'string')").alias(KEY_FIELD),
        F.expr(f"variant_get(record, '$.{AMOUNT_FIELD}', 'double')").alias(AMOUNT_FIELD),
    )
    return fields.groupBy(KEY_FIELD).agg(
        F.count(F.lit(1)).alias("n"), F.sum(AMOUNT_FIELD).alias("total"), F.max(AMOUNT_FIELD).alias("hi")
    )


def _noop_consumer(batches):
    """The apply's place, doing nothing: the partials cross to Python as Arrow and are dropped."""
    import pyarrow as pa

    rows = 0
    for batch in batches:
        rows += batch.num_rows
    yield pa.RecordBatch.from_pydict({"rows": [rows]})


def _run_ours(partials) -> int:
    return sum(r.rows for r in partials.mapInArrow(_noop_consumer, "rows long").collect())


def _run_spark(df) -> int:
    df.write.format("noop").mode("overwrite").save()
    return 0


def _timed(action) -> dict[str, float]:
    before, start = process_tree_ticks_by_kind(os.getpid()), time.monotonic()
    action()
    after, wall = process_tree_ticks_by_kind(os.getpid()), time.monotonic() - start
    return {"wall_s": wall, **{kind: (after[kind] - before[kind]) / TICKS for kind in after}}


def _check(ours_df, spark_df, truth: dict) -> None:
    """Ours and Spark's equal the truth (count, sum, max per user), dead letters none."""
    mine = {r[0]: (r[3], r[4], r[5]) for r in ours_df.collect()}
    theirs = {r[0]: (r[1], r[2], r[3]) for r in spark_df.collect()}
    if None in mine:
        raise SystemExit(f"ours judged {mine[None]} records uncountable")
    for name, got in (("ours", mine), ("spark", theirs)):
        if got != truth:
            wrong = next(k for k in truth if got.get(k) != truth[k])
            raise SystemExit(f"{name} differs from the truth at {wrong}: {got.get(wrong)} != {truth[wrong]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=500_000, help="JSON events in the batch (500,000)")
    p.add_argument("--users", type=int, default=60_000, help="Zipf users (60,000)")
    p.add_argument("--seed", type=int, default=47)
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per variant, alternating (3)")
    p.add_argument("--baseline", help="a git ref: also time ours with json_input.py as it is there")
    p.add_argument("--variants", default="ours,spark", help="which to time, comma-separated (ours,spark)")
    p.add_argument("--plans", type=Path, help="write each variant's physical plan into this folder")
    p.add_argument("--out", type=Path, help="write the raw figures here as JSON")
    args = p.parse_args()

    from statestore.conn.spark import build_session
    from statestore.stream import json_input

    spark = build_session("aggregate-stage", "local[2]", {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("WARN")
    with tempfile.TemporaryDirectory() as folder:
        source, truth = _corpus(spark, args.events, args.users, args.seed, Path(folder))
        # Each variant's plan is built in its timed round, as the job builds one per batch (with
        # its batch's future limit, a literal): the driver's planning and code generation count.
        plans = {}
        if "ours" in args.variants:
            plans["ours"] = (lambda: _ours(source, json_input), _run_ours)
        if args.baseline:
            baseline = _json_input_at(args.baseline)
            plans[f"ours@{args.baseline}"] = (lambda: _ours(source, baseline), _run_ours)
        if "spark" in args.variants:
            plans["spark"] = (lambda: _spark(source), _run_spark)
        if "ours" in plans and "spark" in plans:
            _check(plans["ours"][0](), plans["spark"][0](), truth)
        if args.plans:
            args.plans.mkdir(parents=True, exist_ok=True)
            for name, (build, _) in plans.items():
                shown = spark._jvm.PythonSQLUtils.explainString(build()._jdf.queryExecution(), "formatted")
                (args.plans / f"{name.replace('@', '_at_')}.txt").write_text(shown)
        for build, run in plans.values():  # warm up: the JIT, the Python workers
            run(build())
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in plans}
        for i in range(args.rounds):
            order = list(plans) if i % 2 == 0 else list(reversed(plans))
            for name in order:
                build, run = plans[name]
                runs[name].append(_timed(lambda build=build, run=run: run(build())))
                print(name, {k: round(v, 2) for k, v in runs[name][-1].items()}, flush=True)
        source.unpersist()
    spark.stop()
    medians = {
        name: {kind: round(statistics.median(r[kind] for r in rounds), 2) for kind in rounds[0]}
        for name, rounds in runs.items()
    }
    for name, m in medians.items():
        m["spark_cpu_s"] = round(m["jvm"] + m["workers"], 2)
        print(f"{name:24} median: JVM {m['jvm']:6.2f} s, workers {m['workers']:5.2f} s, wall {m['wall_s']:6.2f} s")
    if args.out:
        args.out.write_text(
            json.dumps(
                {"settings": vars(args) | {"plans": None, "out": None}, "runs": runs, "medians": medians},
                indent=1,
                default=str,
            )
        )


if __name__ == "__main__":
    main()
