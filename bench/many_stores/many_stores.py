"""Many stores in one keyspace: --stores stores, each written by a short stream, on the local
stack; after every --step stores, what grows and what a reader waits for (issue 34).

One Spark application (local[2]) runs the word-count stream once per store, one after the other
(`--trigger available-now` over a small topic every store reads whole, each with its own
checkpoint), so each store is provisioned, leased, fenced and written as by the job. After
every --step stores:

- the streams' own time (median and slowest of the step), Cassandra's heap in use after a
  full collection is not forced (`nodetool info`), the tables of the keyspace, and how many
  times Cassandra's log has said it discarded prepared statements (its prepared-statement
  cache is full);
- what a reader waits for: `statestore stores` (a process, as a user runs it), the HTTP API's
  `/stores` and `/metrics` (one `statestore serve`), and the Airflow store page's list (its
  first page, and every store's row as the page built it before paging).

At the end every store's counts are compared with the corpus'.

    .venv/bin/python bench/many_stores/many_stores.py                 # make bench-stores: 500
    .venv/bin/python bench/many_stores/many_stores.py --stores 40 --step 20   # a short try

Writes .stack/bench-results/many_stores/many_stores_<heap>.json, and the lines of Cassandra's
log about its heap and prepared-statement cache during the run as cassandra_<heap>.log
(bench/results/many_stores/ with STATESTORE_BENCH_PUBLISH=1; <heap>: STATESTORE_CASSANDRA_HEAP,
the local stack's Cassandra heap, 1g unless set when the stack started). Needs the local
stack; works in keyspace bench_many (dropped at
the start, kept at the end for a look: `--drop` drops it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parents[2] / "plugins"))

import bench_common
import httpx
from bench_common import PROJECT, generate

from statestore.conn import kafka as kafka_io
from statestore.conn.cassandra import DDL_PROFILE
from statestore.conn.spark import build_session
from statestore.core import config as cfg
from statestore.core.codecs import decode_long, decode_text
from statestore.core.config import StreamConfig
from statestore.maintenance.shared.nodetool import Nodetool, NodetoolConfig
from statestore.store.book import registry
from statestore.store.tables import table_for
from statestore.stream.job import JobConfig, start

KEYSPACE = "bench_many"
BIN = Path(sys.executable).parent
DISCARDED = re.compile(r"prepared statements discarded", re.IGNORECASE)
EVIDENCE = re.compile(r"prepared statements discarded|OutOfMemoryError|GCInspector|JVMStabilityInspector")


def _timed(action) -> float:
    began = time.perf_counter()
    action()
    return round(time.perf_counter() - began, 3)


def heap_used_mb(nodetool) -> float | None:
    match = re.search(r"Heap Memory \(MB\)\s*:\s*([0-9.]+)\s*/\s*([0-9.]+)", nodetool.run("info"))
    return None if match is None else float(match.group(1))


def discarded_prepared(log: Path, since: int) -> int:
    """Lines of Cassandra's log after byte `since` saying prepared statements were discarded."""
    with open(log, "rb") as handle:
        handle.seek(since)
        return sum(1 for line in handle if DISCARDED.search(line.decode(errors="replace")))


def log_excerpt(log: Path, since: str, until: str) -> str:
    """Cassandra's log lines from `since` to `until` ("YYYY-MM-DD HH:MM:SS") about its heap and
    its prepared-statement cache: the run's raw evidence of what failed first."""
    kept, keep = [], False
    for line in open(log, errors="replace"):
        stamp = re.match(r"^(INFO|WARN|ERROR|DEBUG)\s+\[[^\]]*\]\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", line)
        if stamp:
            keep = since <= stamp.group(2) <= until
        if keep and EVIDENCE.search(line):
            kept.append(line)
    return "".join(kept)


def readers(session, url: str) -> dict:
    """How long each way of listing the stores takes now."""
    from statestore_airflow import store_page

    env = {"STATESTORE_KEYSPACE": KEYSPACE}
    cli = [str(BIN / "statestore"), "stores", "--format", "jsonl"]
    listed = {}

    def run_cli():
        done = subprocess.run(cli, env=os.environ | env, capture_output=True, text=True, check=True)
        listed["cli"] = len(done.stdout.splitlines())

    def http_stores():
        listed["http"] = len(httpx.get(f"{url}/stores", timeout=600).json()["stores"])

    def metrics():
        httpx.get(f"{url}/metrics", timeout=600).raise_for_status()

    report_dir = PROJECT / ".stack" / "bench" / "many_stores" / "reports"
    first_page = {}

    def page_one():
        first_page.update(store_page.list_data(session, KEYSPACE, report_dir, None, page=1))

    def every_row():
        store_page.list_data(session, KEYSPACE, report_dir, None, page=None)

    figures = {
        "statestore_stores_s": _timed(run_cli),
        "http_stores_s": _timed(http_stores),
        "http_metrics_s": _timed(metrics),
        "store_page_first_page_s": _timed(page_one),
        "store_page_every_row_s": _timed(every_row),
    }
    return figures | {"listed": listed, "store_page_rows": len(first_page["stores"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", type=int, default=500)
    parser.add_argument("--step", type=int, default=50)
    parser.add_argument("--words", type=int, default=2000, help="words of the topic every store counts")
    parser.add_argument("--drop", action="store_true", help="drop the keyspace at the end")
    args = parser.parse_args()

    lines, truth = generate(args.words, 500, 1.1, 10, seed=500)
    workdir, cassandra, kafka, session = bench_common.fresh_run("many_stores", KEYSPACE)
    topic = f"bench-many-{uuid.uuid4().hex[:6]}"
    kafka_io.ensure_topic(kafka, topic, 1)
    kafka_io.produce(kafka, topic, iter(lines))
    nodetool = Nodetool.locate(cfg.resolve(NodetoolConfig))
    log = PROJECT / ".stack" / "logs" / "cassandra" / "system.log"
    log_start = log.stat().st_size if log.exists() else 0
    run_began = time.strftime("%Y-%m-%d %H:%M:%S")
    spark = build_session("bench-many-stores", "local[2]", {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("WARN")
    sys.path.insert(1, str(PROJECT / "bench" / "query_api"))
    import query_api

    query_api.KEYSPACE = KEYSPACE
    server, url = query_api.serve("--workers", "1")
    steps: list[dict] = []
    failure = None
    try:
        stream_seconds: list[float] = []
        for n in range(args.stores):
            store = f"s{n:04d}"
            config = StreamConfig(
                topic=topic, store=store, checkpoint=str(workdir / "cp" / store), trigger="available-now"
            )
            began = time.perf_counter()
            running = start(spark, JobConfig(config, cassandra, kafka))
            try:
                running.query.awaitTermination()
            finally:
                running.stop(None)
            stream_seconds.append(time.perf_counter() - began)
            if (n + 1) % args.step == 0 or n + 1 == args.stores:
                tables = session.execute(
                    "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", [KEYSPACE]
                )
                step = {
                    "stores": n + 1,
                    "stream_s_median": round(statistics.median(stream_seconds), 2),
                    "stream_s_max": round(max(stream_seconds), 2),
                    "tables_in_keyspace": len(list(tables)),
                    "cassandra_heap_used_mb": heap_used_mb(nodetool),
                    "prepared_discarded_log_lines": discarded_prepared(log, log_start) if log.exists() else None,
                    **readers(session, url),
                }
                steps.append(step)
                stream_seconds = []
                print(json.dumps(step), file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - what failed first is the finding: record it, then report
        failure = f"{type(exc).__name__}: {exc}"
        print(f"failed at {len(steps) * args.step}+ stores: {failure}", file=sys.stderr)
    finally:
        server.terminate()
        server.wait(30)
        spark.stop()
    wrong, unwritten = [], []
    for spec, progress in registry.list_stores(session, KEYSPACE):
        if progress.last_batch_id is None:  # its stream failed before a batch (the failure above)
            unwritten.append(spec.name)
            continue
        counted = {decode_text(e.key): decode_long(e.value) for e in table_for(spec).scan_sorted(session)}
        if counted != dict(truth):
            wrong.append(spec.name)
    heap = os.environ.get("STATESTORE_CASSANDRA_HEAP", "1g")
    result = {
        "date": run_began + " UTC",
        "machine": bench_common.machine_description(),
        "settings": vars(args) | {"keyspace": KEYSPACE, "cassandra_heap": heap},
        "steps": steps,
        "failure": failure,
        "stores_registered": len(registry.list_stores(session, KEYSPACE)),
        "stores_unwritten": unwritten,
        "stores_wrong": wrong,
        "exact": not wrong,
    }
    if args.drop:
        session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", execution_profile=DDL_PROFILE, timeout=300)
    out = bench_common.results_dir("many_stores", f"many_stores_{heap}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    if log.exists():
        ended = time.strftime("%Y-%m-%d %H:%M:%S")
        out.with_name(f"cassandra_{heap}.log").write_text(log_excerpt(log, run_began, ended))
    shown = ("failure", "stores_registered", "stores_unwritten", "stores_wrong", "exact")
    print(json.dumps({k: result[k] for k in shown}, indent=1))
    return 0 if result["exact"] and failure is None else 1


if __name__ == "__main__":
    sys.exit(main())
