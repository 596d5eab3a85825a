"""The own_aggregation DAG (issue 47): its params reach spark-submit as flags the example job
(jobs/own_aggregation.py) parses, and a bad store name fails before anything is submitted."""

from __future__ import annotations

import json
from itertools import pairwise

import tests.airflow_env as airflow_env

# isort: split
import pytest
from statestore_airflow import dag_support


@pytest.fixture(scope="module")
def query_dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(airflow_env.DAGS / "own_aggregation.py"), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["own_aggregation"]


@pytest.fixture
def submitted(monkeypatch, tmp_path):
    """Working connections, and spark_submission recording the job's arguments."""
    monkeypatch.setenv("AIRFLOW_CONN_STATESTORE_CASSANDRA", json.dumps({"conn_type": "statestore", "host": "c1"}))
    monkeypatch.setenv("AIRFLOW_CONN_STATESTORE_KAFKA", json.dumps({"conn_type": "generic", "host": "k1:9092"}))
    monkeypatch.setenv("STATESTORE_CHECKPOINT_DIR", str(tmp_path))
    calls = []
    monkeypatch.setattr(dag_support, "spark_master", lambda: "local[2]")
    monkeypatch.setattr(dag_support, "spark_submission", lambda args, conf, master: calls.append(args) or {})
    return calls


def _params(dag, **changes) -> dict:
    from airflow.sdk.definitions.param import ParamsDict

    return {**ParamsDict(dag.params).dump(), **changes}


def test_the_params_become_flags_the_example_job_parses(query_dag, submitted, tmp_path):
    from jobs.own_aggregation import parse_args

    prepare = query_dag.get_task("prepare_submission").python_callable
    prepare(params=_params(query_dag))
    prepare(params=_params(query_dag, shops="/data/shops.csv", max_offsets_per_trigger=500, trigger="10s"))
    defaults, chosen = (parse_args(args)[0] for args in submitted)
    assert (defaults.topic, defaults.store, defaults.checkpoint) == (
        "sample-orders",
        "orders_by_shop",
        str(tmp_path / "orders_by_shop"),
    )
    assert (defaults.shops, defaults.max_offsets_per_trigger, defaults.trigger) == (None, None, "available-now")
    assert (chosen.shops, chosen.max_offsets_per_trigger, chosen.trigger) == ("/data/shops.csv", 500, "10s")
    flags = dict(pairwise(submitted[0]))
    assert flags["--cassandra-hosts"] == "c1" and flags["--kafka-bootstrap"] == "k1:9092"


def test_a_bad_store_name_fails_before_submitting(query_dag, submitted):
    from airflow.sdk.exceptions import AirflowFailException

    prepare = query_dag.get_task("prepare_submission").python_callable
    with pytest.raises(AirflowFailException, match="store"):
        prepare(params=_params(query_dag, store="Bad Name"))
    assert submitted == []
