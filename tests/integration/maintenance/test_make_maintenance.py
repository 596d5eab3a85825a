"""`make maintenance` on the real stack: the Makefile's own recipe (not a copy of its command
lines) runs the four jobs on a small store the stream wrote, in a test keyspace, with its
defaults: key-value stores expire at 30 days of stream time (docs/maintenance.md). Its reports
are where the Airflow store page, given the same folder, finds them (issue 46)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest

from statestore.conn import kafka as kafka_io
from statestore.core import config as cfg
from statestore.core.codecs import millis_of
from statestore.core.event_time import TimedValue
from statestore.store.book import history, registry
from tests.integration.conftest import PROJECT, delete_topic, dump, run_stream

MINUTE, DAY = 60_000, 86_400_000
NOW_MS = int(time.time() * 1000) // MINUTE * MINUTE
# Words seen only 40 days ago, words seen 20 days ago and now, words seen only now.
OLD = [(NOW_MS - 40 * DAY + i, f"ancient{i % 5} common") for i in range(20)]
MIDDLE = [(NOW_MS - 20 * DAY + i, f"middle{i % 3} common") for i in range(12)]
NEW = [(NOW_MS - MINUTE + i, f"fresh{i % 4} common") for i in range(16)]
# The variables of the Makefile a caller's environment or make's own could set (`make test
# STORE=...` hands its command-line variables down in MAKEFLAGS).
MAKE_VARIABLES = ("STORE", "RETENTION", "WINDOW", "HOP", "GRACE", "SESSION_GAP", "REPORTS", "CHECKPOINT")
MAKE_VARIABLES += ("STATESTORE_REPORT_DIR", "STATESTORE_STACK_DIR")  # REPORTS' defaults


def make_maintenance(cassandra_config, kafka_config, store: str, checkpoint, reports) -> subprocess.CompletedProcess:
    """`make maintenance STORE=... CHECKPOINT=... REPORTS=...` with the STATESTORE_* settings of
    the test keyspace (and RETENTION unset: its default is what is tested)."""
    env = {k: v for k, v in os.environ.items() if k not in (*MAKE_VARIABLES, "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env |= cfg.to_environment(cassandra_config) | cfg.to_environment(kafka_config)
    argv = ["make", "--no-print-directory", "maintenance"]
    # The shared venv is never reinstalled from a test: when its requirements changed since the
    # last `make venv`, the install step's venv is taken as it is (the recipe still runs as is).
    if subprocess.run(["make", "-q", ".venv/.installed"], cwd=PROJECT, env=env).returncode != 0:
        argv[1:1] = ["-o", ".venv/.installed"]
    argv += [f"STORE={store}", f"CHECKPOINT={checkpoint}", f"REPORTS={reports}"]
    return subprocess.run(
        argv, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600
    )


def report(reports, job: str, store: str) -> dict:
    """A job's report, laid out as the state_maintenance DAG lays them out."""
    folder = reports / "validate_idempotency" / store if job == "validate_idempotency" else reports
    return json.loads((folder / f"{job}.json").read_text())


@pytest.fixture
def timed_topic(kafka_config):
    name = f"it-make-{uuid.uuid4().hex[:6]}"
    kafka_io.ensure_topic(kafka_config, name, 2)
    kafka_io.produce(kafka_config, name, [TimedValue(text.encode(), t) for t, text in OLD + MIDDLE + NEW])
    yield name
    delete_topic(kafka_config, name)


def test_make_maintenance_runs_the_four_jobs_with_their_defaults(
    spark, session, keyspace, cassandra_config, kafka_config, timed_topic, store_name, tmp_path
):
    """A key-value store. That a window store keeps its own retention when the jobs are given
    RETENTION's is the expire job's test (test_maintenance_expire); the recipe is the same."""
    checkpoint, reports = tmp_path / "checkpoint", tmp_path / "reports"
    run_stream(spark, cassandra_config, kafka_config, timed_topic, store_name, checkpoint)
    stream_ms = NOW_MS - MINUTE + 15
    assert millis_of(registry.progress(session, keyspace, store_name).max_event_time) == stream_ms

    done = make_maintenance(cassandra_config, kafka_config, store_name, checkpoint, reports)
    assert done.returncode == 0, done.stdout[-4000:]

    [expired] = report(reports, "expire_state", store_name)["stores"]
    assert expired["store"] == store_name
    # RETENTION's default, 30 days: the words only seen 40 days ago go.
    assert (expired["retention_ms"], expired["cutoff_ms"]) == (30 * DAY, stream_ms - 30 * DAY)
    assert (expired["removed"], expired["kept"]) == (5, 3 + 4 + 1)
    assert sorted(dump(session, keyspace, store_name)) == sorted(
        ["common", *(f"middle{i}" for i in range(3)), *(f"fresh{i}" for i in range(4))]
    )
    assert history.expired_before(session, keyspace, store_name) == expired["cutoff_ms"]
    assert [s["store"] for s in report(reports, "compact_state", store_name)["stores"]] == [store_name]
    assert report(reports, "audit_partitions", store_name)["status"] == "ok"
    assert report(reports, "validate_idempotency", store_name)["status"] == "pass"

    # The store page, its report folder the one make maintenance wrote to (`make airflow` gives it
    # REPORTS as STATESTORE_REPORT_DIR): the audit and the validation's Data Docs, not "no audit
    # report yet".
    from statestore_airflow.store_page import detail_data

    page = detail_data(session, keyspace, store_name, 5, reports)
    assert page["audit"]["html"] and page["audit"]["status"] == "ok"
    assert page["audit_level"]["level"] == "ok"
    assert page["data_docs"] == f"reports/validate_idempotency/{store_name}/data_docs/index.html"
