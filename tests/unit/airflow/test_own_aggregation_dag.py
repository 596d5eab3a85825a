"""The own_aggregation DAG (issue 47): its params reach spark-submit as flags the example job
(jobs/own_aggregation.py) parses, and a bad store name fails before anything is submitted."""

from __future__ import annotations

from itertools import pairwise

# isort: split
import pytest

from tests.unit.airflow.submissions import params_of, parsed_dag, record_submissions


@pytest.fixture(scope="module")
def query_dag():
    return parsed_dag("own_aggregation.py", "own_aggregation")


@pytest.fixture
def submitted(monkeypatch, tmp_path):
    return record_submissions(monkeypatch, tmp_path, "args")


_params = params_of


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
