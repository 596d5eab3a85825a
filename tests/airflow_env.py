"""Airflow settings for the tests, applied before anything imports Airflow.

Airflow reads AIRFLOW_HOME and its AIRFLOW__* settings once, when it is first imported, and
creates its config file there. Every test module that uses Airflow imports this module first,
so the tests work in a temporary home (never the developer's ~/airflow) with this project's
dags/ and plugins/ folders and an SQLite database in that home (`migrate_db` creates it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
DAGS = PROJECT / "dags"
PLUGINS = PROJECT / "plugins"

if "airflow" in sys.modules and os.environ.get("AIRFLOW__CORE__DAGS_FOLDER") != str(DAGS):
    raise RuntimeError("Airflow was imported before tests/airflow_env.py set up its test home: import this first")

HOME = Path(os.environ.get("STATESTORE_TEST_AIRFLOW_HOME") or tempfile.mkdtemp(prefix="statestore-airflow-"))
os.environ.update(
    {
        "AIRFLOW_HOME": str(HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME}/airflow.db",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(HOME / "logs"),
    }
)
# Airflow adds the plugins folder to sys.path when its settings load; the tests import the
# hook without loading every setting first.
if str(PLUGINS) not in sys.path:
    sys.path.insert(0, str(PLUGINS))


def migrate_db() -> None:
    """Create Airflow's metadata database in the test home (dag.test() needs one)."""
    if (HOME / "airflow.db").exists():
        return
    airflow = Path(sys.executable).parent / "airflow"
    subprocess.run([str(airflow), "db", "migrate"], check=True, env=os.environ.copy(), capture_output=True, timeout=300)
