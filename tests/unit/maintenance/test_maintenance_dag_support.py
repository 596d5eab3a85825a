"""The state_maintenance DAG's plumbing: each job's command line from the params (parsed back
by the job's own parser), the reports of a run, and the operator's reading of exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import time

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException
from statestore_airflow import dag_support
from statestore_airflow.operators import MaintenanceJobOperator

from statestore.maintenance import main as maintenance_main
from statestore.maintenance.shared.selection import Policy, TimeBasis

PARAMS = {
    "retention": "30d",
    "basis": "processing",
    "table_ttl": None,
    "dry_run": True,
    "history_retention": "7d",
    "tombstone_threshold": 0.3,
    "cassandra_compaction": "off",
    "policy": "warn",
    "warn_size": "10MiB",
    "fail_size": "40MiB",
    "warn_entries": None,
    "fail_entries": 5000,
    "token_ranges": 8,
    "flush": False,
    "starting_offsets": "earliest",
    "replay_batches": 2,
    "quality": False,
}
STORES = {
    "expire_state": ["a", "b"],
    "compact_state": ["a", "b", "h"],
    "audit_partitions": ["a", "b", "h"],
    "validate_idempotency": ["a", "b"],
}


def test_every_job_parses_the_arguments_it_is_given(tmp_path):
    (tmp_path / "checkpoints" / "a").mkdir(parents=True)  # only store a has the default checkpoint
    runs = dag_support.maintenance_args(STORES, PARAMS, tmp_path / "reports", tmp_path / "checkpoints")
    expire = maintenance_main.expire_parser().parse_args(runs["expire_state"][0])
    assert (expire.store, expire.retention, expire.basis, expire.dry_run) == (
        ["a", "b"],
        30 * 86_400_000,
        TimeBasis.PROCESSING,
        True,
    )
    assert expire.table_ttl is None and expire.token_ranges == 8
    compact = maintenance_main.compact_parser().parse_args(runs["compact_state"][0])
    assert (compact.store, compact.history_retention, compact.tombstone_threshold) == (
        ["a", "b", "h"],
        7 * 86_400_000,
        0.3,
    )
    assert compact.cassandra_compaction == "off" and compact.dry_run
    audit = maintenance_main.audit_parser().parse_args(runs["audit_partitions"][0])
    assert (audit.policy, audit.warn_size, audit.fail_size, audit.fail_entries) == (
        Policy.WARN,
        10 * 1024**2,
        40 * 1024**2,
        5000,
    )
    assert audit.report_dir == tmp_path / "reports" and audit.warn_entries is None
    first, second = (
        maintenance_main.validate_parser().parse_args([*a, "--kafka-bootstrap", "k:9092"])
        for a in runs["validate_idempotency"]
    )
    assert (first.store, first.checkpoint, second.store, second.checkpoint) == (
        "a",
        str(tmp_path / "checkpoints" / "a"),
        "b",
        None,
    )
    assert first.report_dir == tmp_path / "reports" / "validate_idempotency" / "a"
    assert first.no_quality and first.replay_batches == 2


def test_a_job_without_stores_gets_no_run(tmp_path):
    runs = dag_support.maintenance_args({**STORES, "expire_state": []}, PARAMS, tmp_path, tmp_path)
    assert runs["expire_state"] == [] and len(runs["compact_state"]) == 1
    assert list(runs) == list(dag_support.JOB_ORDER)


def test_reports_of_this_run_only(tmp_path):
    def write(path, body):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(body))

    write(tmp_path / "expire_state.json", {"generated_at": "old", "stores": [{"store": "a"}]})
    stale = time.time() - 3600
    os.utime(tmp_path / "expire_state.json", (stale, stale))
    write(tmp_path / "audit_partitions.json", {"status": "warn", "stores": [{"store": "a"}, {"store": "b"}]})
    write(tmp_path / "validate_idempotency" / "a" / "validate_idempotency.json", {"status": "pass", "store": "a"})
    found = dag_support.report_summaries(tmp_path, since=time.time() - 60)
    assert sorted(found) == ["audit_partitions", "validate_idempotency"]
    assert found["audit_partitions"][0]["status"] == "warn" and found["audit_partitions"][0]["stores"] == ["a", "b"]
    assert found["validate_idempotency"][0]["stores"] == ["a"]


class FinishedSubmit:
    def __init__(self, code):
        self._submit_sp = subprocess.CompletedProcess([], code)


@pytest.mark.parametrize(
    ("code", "raised"), [(3, AirflowFailException), (2, AirflowFailException), (1, AirflowException)]
)
def test_check_failures_and_bad_settings_fail_at_once_other_errors_retry(monkeypatch, code, raised):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    operator = MaintenanceJobOperator(task_id="audit_partitions", cassandra_conn_id="c", application_args=["--x"])
    monkeypatch.setenv("AIRFLOW_CONN_C", json.dumps({"conn_type": "cassandra", "host": "h", "password": "pw"}))

    def failing_submit(self, context):
        self._hook = FinishedSubmit(code)
        raise AirflowException(f"Cannot execute: spark-submit. Error code is: {code}.")

    monkeypatch.setattr(SparkSubmitOperator, "execute", failing_submit)
    with pytest.raises(raised) as caught:
        operator.execute({})
    assert (type(caught.value) is AirflowFailException) == (code in (2, 3))
    assert operator.env_vars["STATESTORE_CASSANDRA_PASSWORD"] == "pw"


def test_a_job_the_plan_gave_no_store_is_skipped():
    with pytest.raises(AirflowSkipException, match="no store"):
        MaintenanceJobOperator(task_id="expire_state", cassandra_conn_id="c", application_args=None).execute({})
