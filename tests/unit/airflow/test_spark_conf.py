"""The wordcount_stream DAG's spark_conf param: only sizes, counts and timeouts reach spark-submit;
a key that can carry code (Java options, class names, paths, URLs, environment) is refused
before anything is submitted, and the task fails without a retry."""

from __future__ import annotations

import re

import tests.airflow_env as airflow_env

# isort: split
import pytest
from statestore_airflow.spark_conf import ALLOWED_SPARK_CONF, checked_spark_conf

from statestore.core.errors import ConfigError
from tests.unit.airflow.submissions import record_submissions

# Keys that run code or load it on the worker, directly or by naming something.
DANGEROUS = [
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
    "spark.driver.extraClassPath",
    "spark.jars",
    "spark.files",
    "spark.pyspark.python",
    "spark.pyspark.driver.python",
    "spark.executorEnv.LD_PRELOAD",
    "spark.sql.extensions",
    "spark.plugins",
    "spark.extraListeners",
    "spark.serializer",
    "spark.driver.resource.gpu.discoveryScript",
    "spark.sql.warehouse.dir",
    "spark.eventLog.dir",
]


def test_allowed_settings_pass_as_text():
    conf = {"spark.executor.memory": "2g", "spark.sql.shuffle.partitions": 8, "spark.sql.adaptive.enabled": True}
    assert checked_spark_conf(conf) == {
        "spark.executor.memory": "2g",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.enabled": "true",
    }
    assert checked_spark_conf({}) == {} and checked_spark_conf(None) == {}


@pytest.mark.parametrize("key", DANGEROUS)
def test_a_key_that_can_carry_code_is_refused_naming_it_and_the_allowed_ones(key):
    assert key not in ALLOWED_SPARK_CONF
    with pytest.raises(ConfigError, match=re.escape(f"spark_conf: {key} is not allowed")) as caught:
        checked_spark_conf({"spark.executor.memory": "1g", key: "-Dx=y"})
    assert "spark.executor.memory, spark.executor.memoryOverhead" in str(caught.value)  # the list, sorted


def test_every_refused_key_is_named_and_odd_values_are_refused():
    with pytest.raises(ConfigError, match=r"spark\.driver\.extraJavaOptions, spark\.jars are not allowed"):
        checked_spark_conf({"spark.jars": "http://x/evil.jar", "spark.driver.extraJavaOptions": "-agentpath:/x"})
    with pytest.raises(ConfigError, match=r"spark\.executor\.memory must be text, a number or a boolean"):
        checked_spark_conf({"spark.executor.memory": ["1g", "--conf"]})
    with pytest.raises(ConfigError, match="must be an object"):
        checked_spark_conf("spark.driver.extraJavaOptions=-Dx")


def test_the_allowlist_names_nothing_that_can_carry_code():
    for key in ALLOWED_SPARK_CONF:
        lowered = key.lower()
        for word in ("java", "class", "path", "jar", "file", "dir", "env", "python", "plugin", "listener", "url"):
            assert word not in lowered.removeprefix("spark.python.worker."), key


@pytest.fixture(scope="module")
def stream_dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(airflow_env.DAGS / "wordcount_stream.py"), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["wordcount_stream"]


def _defaults(dag) -> dict:
    from airflow.sdk.definitions.param import ParamsDict

    return dict(ParamsDict(dag.params).dump())


@pytest.fixture
def submitted(monkeypatch, tmp_path):
    return record_submissions(monkeypatch, tmp_path, "conf")


def test_the_stream_task_refuses_java_options_before_submitting_and_without_retry(stream_dag, submitted):
    from airflow.sdk.exceptions import AirflowFailException

    prepare = stream_dag.get_task("prepare_submission").python_callable
    params = _defaults(stream_dag)
    params["spark_conf"] = {"spark.executor.memory": "1g", "spark.driver.extraJavaOptions": "-agentpath:/tmp/x.so"}
    with pytest.raises(AirflowFailException, match=r"ConfigError: spark_conf: spark\.driver\.extraJavaOptions"):
        prepare(params=params)
    assert submitted == []  # nothing reached spark-submit
    params["spark_conf"] = {"spark.executor.memory": "1g"}
    prepare(params=params)
    assert submitted == [{"spark.executor.memory": "1g"}]


def test_the_trigger_form_refuses_a_key_off_the_list(stream_dag):
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = ParamsDict(stream_dag.params)
    params.update({"spark_conf": {"spark.executor.memory": "1g", "spark.sql.shuffle.partitions": 8}})
    params.validate()
    with pytest.raises(ParamValidationError, match="param spark_conf"):
        params.update({"spark_conf": {"spark.driver.extraJavaOptions": "-Dx=y"}})
        params.validate()
    description = stream_dag.params.get_param("spark_conf").description
    assert all(key in description for key in ALLOWED_SPARK_CONF)
    assert "spark_conf" in stream_dag.doc_md or "Spark conf" in stream_dag.doc_md
