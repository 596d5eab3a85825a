"""`make airflow`'s setup in a real Airflow metadata database: the project's DAGs, parsed as
the DAG processor parses them with the settings `scripts/airflow` runs Airflow with, start
unpaused (a paused DAG's triggered run waits `queued` without a word: issue 46). SQLite in a
temporary home; no Airflow component is started, no service is needed."""

from __future__ import annotations

import json
import subprocess

from tests.unit.airflow.test_local_airflow import PROJECT, _clean_env

# Every DAG of dags/ (each file's DAG is named after it).
OURS = {path.stem for path in (PROJECT / "dags").glob("*.py") if path.stem != "__init__"}
# With the settings of `make airflow` (scripts/airflow env): a new database, the DAGs folder
# parsed into it (what the dag-processor does on its first pass), then the DAGs as listed.
SETUP = """
eval "$("$1" env)"
airflow db migrate >/dev/null
airflow dags reserialize >/dev/null 2>&1
airflow dags list -o json 2>/dev/null
"""


def test_make_airflows_dags_start_unpaused(tmp_path):
    done = subprocess.run(
        ["bash", "-ec", SETUP, "_", str(PROJECT / "scripts" / "airflow")],
        env=_clean_env(AIRFLOW_HOME=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    listed = json.loads([line for line in done.stdout.splitlines() if line.startswith("[")][-1])
    paused = {d["dag_id"]: str(d["is_paused"]) == "True" for d in listed}
    assert set(paused) == OURS
    assert [dag for dag, is_paused in paused.items() if is_paused] == []
