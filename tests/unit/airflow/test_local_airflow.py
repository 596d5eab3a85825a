"""`make airflow`'s settings (scripts/airflow env, bash only) against what the provider, the
maintenance DAG, `make maintenance` and the store page expect of them. No Airflow is started."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import tests.airflow_env as airflow_env

# isort: split
import pytest
from statestore_airflow import dag_support, provider, store_monitor, store_page

PROJECT = airflow_env.PROJECT
# The caller's own settings would move the folders under test (a make of the caller's, too).
CALLERS = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "STORE", "REPORTS", "AIRFLOW_HOME", "STATESTORE_REPORT_DIR")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CALLERS and not k.startswith("STATESTORE_STACK")}
    return {**env, **extra}


def local_airflow_env(home: Path) -> dict[str, str]:
    """The variables `make airflow` runs Airflow with, read from `scripts/airflow env`."""
    script = 'eval "$("$1" env)" && env -0'
    done = subprocess.run(
        ["bash", "-c", script, "_", str(PROJECT / "scripts" / "airflow")],
        env=_clean_env(AIRFLOW_HOME=str(home)),
        capture_output=True,
        timeout=30,
        check=True,
    )
    return dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)


def test_the_local_connections_are_of_the_providers_own_types(tmp_path):
    env = local_airflow_env(tmp_path)
    cassandra = json.loads(env["AIRFLOW_CONN_STATESTORE_CASSANDRA"])
    kafka = json.loads(env["AIRFLOW_CONN_STATESTORE_KAFKA"])
    provided = {c["connection-type"] for c in provider.get_provider_info()["connection-types"]}
    assert (cassandra["conn_type"], kafka["conn_type"]) == (provider.CONN_TYPE, provider.KAFKA_CONN_TYPE)
    assert {cassandra["conn_type"], kafka["conn_type"]} <= provided


def test_the_local_airflow_creates_the_projects_dags_unpaused(tmp_path):
    # A paused DAG's triggered run waits `queued` without a word (issue 46); the integration test
    # tests/integration/airflow/test_local_airflow.py sees it in a real metadata database.
    env = local_airflow_env(tmp_path)
    assert env["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"].lower() == "false"


def _make_report_dirs(*variables: str) -> dict[str, Path]:
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "maintenance", "STORE=words", *variables],
        cwd=PROJECT,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    dirs = {}
    for line in done.stdout.splitlines():
        if "jobs/" in line and "--report-dir" in line:
            job = line.split("jobs/", 1)[1].split(".py", 1)[0]
            dirs[job] = (PROJECT / line.split("--report-dir ", 1)[1].split()[0]).resolve()
    return dirs


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_make_maintenance_writes_where_the_local_airflow_and_its_store_page_read(tmp_path):
    """One report folder (REPORTS, STATESTORE_REPORT_DIR: the same default) in one layout: the
    maintenance DAG's, which the store page reads (issue 46: the page said 'no audit report yet'
    after `make maintenance`)."""
    folder = Path(local_airflow_env(tmp_path)["STATESTORE_REPORT_DIR"]).resolve()
    made = _make_report_dirs()
    assert folder == (PROJECT / ".stack" / "reports" / "maintenance").resolve()
    # The DAG's layout, job by job.
    params = {
        "token_ranges": 4, "dry_run": False, "basis": "stream", "retention": "30d", "table_ttl": None,
        "tombstone_threshold": 0.2, "cassandra_compaction": "compact", "history_retention": None,
        "policy": "fail", "warn_size": "1MiB", "fail_size": "2MiB", "warn_entries": None, "fail_entries": None,
        "flush": False, "starting_offsets": "earliest", "replay_batches": 1, "quality": True,
    }  # fmt: skip
    stores = {job: ["words"] for job in made}
    runs = dag_support.maintenance_args(stores, params, folder, tmp_path)
    dag_dirs = {job: Path(args[args.index("--report-dir") + 1]) for job, [args] in runs.items()}
    assert made == dag_dirs
    # Where the store page looks: the audit in the folder itself, a store's validation under it.
    audit = made["audit_partitions"] / f"{store_page.AUDIT_REPORT}.json"
    assert audit.parent == folder
    assert made["validate_idempotency"] == folder / store_monitor.VALIDATION_REPORTS / "words"
    # Another folder, given once, moves every report (and the local Airflow's reads) with it.
    moved = _make_report_dirs(f"REPORTS={tmp_path / 'r'}")
    assert set(moved.values()) == {tmp_path / "r", tmp_path / "r" / "validate_idempotency" / "words"}
    env = _clean_env(AIRFLOW_HOME=str(tmp_path), STATESTORE_REPORT_DIR=str(tmp_path / "r"))
    assert f"STATESTORE_REPORT_DIR={tmp_path / 'r'}" in subprocess.run(
        ["make", "--no-print-directory", "-n", "airflow", f"REPORTS={tmp_path / 'r'}"],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
