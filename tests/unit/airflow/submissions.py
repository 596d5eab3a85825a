"""What the DAG tests share: a DAG parsed from dags/, its params' defaults with changes, and
spark_submission replaced by a recorder (with working connections), so a test sees exactly what
a DAG's prepare task would hand spark-submit."""

from __future__ import annotations

import json

import tests.airflow_env as airflow_env

# isort: split
from statestore_airflow import dag_support


def parsed_dag(file: str, dag_id: str):
    """The DAG `dag_id` of dags/`file`, parsed as Airflow parses it (no import errors)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(airflow_env.DAGS / file), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags[dag_id]


def params_of(dag, **changes) -> dict:
    """The DAG's params as a trigger without changes gives them, then `changes`."""
    from airflow.sdk.definitions.param import ParamsDict

    return {**ParamsDict(dag.params).dump(), **changes}


def record_submissions(monkeypatch, tmp_path, part: str) -> list:
    """Working connections, and spark_submission recording the `part` of each call ("args": the
    job's arguments, "conf": its --conf) in the list returned."""
    monkeypatch.setenv("AIRFLOW_CONN_STATESTORE_CASSANDRA", json.dumps({"conn_type": "statestore", "host": "c1"}))
    monkeypatch.setenv("AIRFLOW_CONN_STATESTORE_KAFKA", json.dumps({"conn_type": "generic", "host": "k1:9092"}))
    monkeypatch.setenv("STATESTORE_CHECKPOINT_DIR", str(tmp_path))
    calls: list = []
    monkeypatch.setattr(dag_support, "spark_master", lambda: "local[2]")
    monkeypatch.setattr(
        dag_support,
        "spark_submission",
        lambda args, conf, master: calls.append({"args": args, "conf": conf}[part]) or {},
    )
    return calls
