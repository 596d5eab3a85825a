"""The wordcount_stream DAG's JSON params (issue 47): checked by the job's own rules and passed to
spark-submit as the job's flags; the defaults submit the word count as before."""

from __future__ import annotations

import json
from itertools import pairwise

import tests.airflow_env as airflow_env

# isort: split
import pytest
from statestore_airflow import dag_support


@pytest.fixture(scope="module")
def stream_dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(airflow_env.DAGS / "wordcount_stream.py"), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["wordcount_stream"]


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


def _flags(args: list[str]) -> dict[str, str]:
    return {flag: value for flag, value in pairwise(args) if flag.startswith("--")}


def test_json_params_become_the_jobs_flags(stream_dag, submitted):
    prepare = stream_dag.get_task("prepare_submission").python_callable
    prepare(params=_params(stream_dag))
    assert not {"--input-format", "--aggregate", "--key", "--key-expr", "--time-field"} & set(submitted[0])
    params = _params(
        stream_dag, input_format="json", aggregate="n = count(),total=sum_int(amount)", key="shop", time_field="ts"
    )
    prepare(params=params)
    flags = _flags(submitted[1])
    assert (flags["--input-format"], flags["--aggregate"], flags["--key"], flags["--time-field"]) == (
        "json",
        "n=count(), total=sum_int(amount)",
        "shop",
        "ts",
    )


def test_json_without_measures_fails_before_submitting(stream_dag, submitted):
    from airflow.sdk.exceptions import AirflowFailException

    prepare = stream_dag.get_task("prepare_submission").python_callable
    with pytest.raises(AirflowFailException, match="needs --aggregate"):
        prepare(params=_params(stream_dag, input_format="json", key="shop"))
    assert submitted == []
