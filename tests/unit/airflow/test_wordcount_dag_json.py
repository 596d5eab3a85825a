"""The wordcount_stream DAG's JSON params (issue 47): checked by the job's own rules and passed to
spark-submit as the job's flags; the defaults submit the word count as before."""

from __future__ import annotations

from itertools import pairwise

# isort: split
import pytest

from tests.unit.airflow.submissions import params_of, parsed_dag, record_submissions


@pytest.fixture(scope="module")
def stream_dag():
    return parsed_dag("wordcount_stream.py", "wordcount_stream")


@pytest.fixture
def submitted(monkeypatch, tmp_path):
    return record_submissions(monkeypatch, tmp_path, "args")


_params = params_of


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
