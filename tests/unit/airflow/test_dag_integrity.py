"""Every DAG file imports cleanly, fast, with no service reachable, and follows the house rules."""

from __future__ import annotations

import sys
import time
from datetime import datetime

import tests.airflow_env as airflow_env

# isort: split
import itertools

import pytest

EXPECTED = {"wordcount_stream", "state_maintenance", "state_store_admin", "own_aggregation"}


@pytest.fixture(scope="module")
def dagbag():
    # Connections that would fail if anything used them at parse time.
    mp = pytest.MonkeyPatch()
    mp.setenv("AIRFLOW_CONN_STATESTORE_CASSANDRA", '{"conn_type": "statestore", "host": "192.0.2.1", "port": 1}')
    mp.setenv("AIRFLOW_CONN_STATESTORE_KAFKA", "not a connection")
    mp.setenv("STATESTORE_SPARK_JARS", "/nonexistent/connector.jar")
    from airflow.dag_processing.dagbag import DagBag

    started = time.monotonic()
    bag = DagBag(dag_folder=str(airflow_env.DAGS), safe_mode=False)
    bag.parse_seconds = time.monotonic() - started
    yield bag
    mp.undo()


def test_every_dag_file_imports_without_errors_and_fast(dagbag):
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == EXPECTED
    assert dagbag.parse_seconds < 15, f"parsing took {dagbag.parse_seconds:.1f}s: something does work at parse time"


@pytest.mark.parametrize("dag_id", sorted(EXPECTED))
def test_house_rules(dagbag, dag_id):
    dag = dagbag.dags[dag_id]
    assert dag.doc_md and len(dag.doc_md) > 200
    assert "statestore" in dag.tags and len(dag.tags) >= 2
    assert dag.catchup is False
    assert dag.start_date == datetime.fromisoformat("2026-01-01T00:00:00+00:00")
    for task in dag.tasks:
        if task.task_id == "watcher":  # it only turns an upstream failure into the run's outcome
            continue
        assert task.retries >= 1, f"{dag_id}.{task.task_id} has no retries"


def test_schedules_and_concurrency(dagbag):
    assert dagbag.dags["wordcount_stream"].max_active_runs == 1
    assert dagbag.dags["wordcount_stream"].schedule is None
    assert dagbag.dags["state_store_admin"].schedule is None
    assert dagbag.dags["state_maintenance"].schedule == "30 3 * * *"
    assert dagbag.dags["state_maintenance"].max_active_runs == 1


@pytest.mark.parametrize("dag_id", sorted(EXPECTED))
def test_every_field_of_the_trigger_form_has_a_title(dagbag, dag_id):
    params = dagbag.dags[dag_id].params
    assert [name for name in params if not params.get_param(name).schema.get("title")] == []


@pytest.mark.parametrize("dag_id", sorted(EXPECTED))
def test_a_field_empty_by_default_can_stay_empty_on_the_trigger_form(dagbag, dag_id):
    """Airflow 3's form requires a field whose type does not allow null, and keeps Trigger
    disabled while it is empty: a drop's confirmation blocked every action (issue 46)."""
    params = dagbag.dags[dag_id].params
    required_and_empty = []
    for name in params:
        param = params.get_param(name)
        kinds = param.schema.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if param.value in (None, "") and "null" not in kinds:
            required_and_empty.append(name)
    assert required_and_empty == []


def test_the_dags_run_on_demand_start_unpaused_in_any_airflow(dagbag):
    """A paused DAG's triggered run waits `queued` without a word. Those with no schedule run
    only when triggered, so they start unpaused; the nightly maintenance keeps Airflow's
    setting (dags_are_paused_at_creation; `make airflow` sets it off)."""
    for dag_id in ("wordcount_stream", "state_store_admin", "own_aggregation"):
        assert dagbag.dags[dag_id].schedule is None and dagbag.dags[dag_id].is_paused_upon_creation is False
    assert dagbag.dags["state_maintenance"].is_paused_upon_creation is None


@pytest.mark.parametrize(
    ("dag_id", "conf", "bad_key"),
    [
        ("wordcount_stream", {"store": "Bad Name"}, "store"),
        ("wordcount_stream", {"trigger": "soon"}, "trigger"),
        ("wordcount_stream", {"partitions": 0}, "partitions"),
        ("wordcount_stream", {"store_type": "rocksdb"}, "store_type"),
        ("wordcount_stream", {"window": "a minute"}, "window"),
        ("wordcount_stream", {"hop": "-5s"}, "hop"),
        ("wordcount_stream", {"session_gap": "5 minutes"}, "session_gap"),
        ("wordcount_stream", {"driver_apply_records": -1}, "driver_apply_records"),
        ("wordcount_stream", {"max_future": "an hour"}, "max_future"),
        ("wordcount_stream", {"compaction": "leveled"}, "compaction"),
        ("state_store_admin", {"action": "explode"}, "action"),
        ("state_store_admin", {"options": "ttl=5"}, "options"),
        ("state_maintenance", {"policy": "ignore"}, "policy"),
        ("state_maintenance", {"token_ranges": 0}, "token_ranges"),
        ("state_maintenance", {"retention": "a week"}, "retention"),
        ("state_maintenance", {"basis": "wall"}, "basis"),
        ("state_maintenance", {"tombstone_threshold": 2}, "tombstone_threshold"),
        ("state_maintenance", {"history_retention": "30 days"}, "history_retention"),
        ("state_maintenance", {"table_ttl": "-1"}, "table_ttl"),
    ],
)
def test_the_trigger_form_refuses_bad_params(dagbag, dag_id, conf, bad_key):
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = ParamsDict(dagbag.dags[dag_id].params)
    params.validate()  # the defaults are valid
    with pytest.raises(ParamValidationError, match=f"param {bad_key}"):
        params.update(conf)
        params.validate()


def test_spark_tasks_take_their_arguments_at_run_time(dagbag):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.sdk.definitions.xcom_arg import XComArg

    stream = dagbag.dags["wordcount_stream"].get_task("run_stream")
    assert isinstance(stream, SparkSubmitOperator)
    assert stream.application == str(airflow_env.PROJECT / "jobs" / "wordcount_stream.py")
    assert (airflow_env.PROJECT / "jobs" / "wordcount_stream.py").is_file()
    for field in ("application_args", "py_files", "jars", "packages", "conf"):
        assert isinstance(getattr(stream, field), XComArg), field
    assert stream.upstream_task_ids == {"prepare_submission"}
    assert "password" in stream.env_vars["STATESTORE_CASSANDRA_PASSWORD"]  # a template, rendered when it runs

    from statestore_airflow.operators import MaintenanceJobOperator

    assert issubclass(MaintenanceJobOperator, SparkSubmitOperator)
    dag = dagbag.dags["state_maintenance"]
    for job in ("expire_state", "compact_state", "audit_partitions"):
        operator = dag.get_task(job)
        assert isinstance(operator, MaintenanceJobOperator)
        assert operator.application == str(airflow_env.PROJECT / "jobs" / f"{job}.py")
        for field in ("application_args", "py_files", "jars", "packages", "conf"):
            assert isinstance(getattr(operator, field), XComArg), f"{job}.{field}"
        assert operator.env_vars is None  # the password is added when it runs, never rendered into XCom
    validate = dag.get_task("validate_idempotency")  # one mapped instance per store
    assert validate.operator_class is MaintenanceJobOperator
    assert validate.partial_kwargs["application"] == str(airflow_env.PROJECT / "jobs" / "validate_idempotency.py")
    assert "prepare_validations" in validate.upstream_task_ids
    for job in ("expire_state", "compact_state", "audit_partitions", "validate_idempotency"):
        assert (airflow_env.PROJECT / "jobs" / f"{job}.py").is_file()

    query = dagbag.dags["own_aggregation"].get_task("run_query")
    assert isinstance(query, SparkSubmitOperator)
    assert query.application == str(airflow_env.PROJECT / "jobs" / "own_aggregation.py")
    assert (airflow_env.PROJECT / "jobs" / "own_aggregation.py").is_file()
    for field in ("application_args", "py_files", "jars", "packages", "conf"):
        assert isinstance(getattr(query, field), XComArg), field
    assert "password" in query.env_vars["STATESTORE_CASSANDRA_PASSWORD"]


def test_maintenance_runs_its_jobs_in_order_publishes_every_report_and_fails_on_any_failure(dagbag):
    from airflow.sdk import TriggerRule

    dag = dagbag.dags["state_maintenance"]
    order = ["plan", "expire_state", "compact_state", "audit_partitions", "validate_idempotency", "publish_reports"]
    for before, after in itertools.pairwise(order):
        assert after in dag.get_task(before).downstream_task_ids
    for later in order[2:]:  # every job runs (and the reports go out) whatever failed before it
        assert dag.get_task(later).trigger_rule == TriggerRule.ALL_DONE
    outlets = dag.get_task("publish_reports").outlets
    assert sorted(a.name for a in outlets) == sorted(f"statestore_{job}_report" for job in order[1:5])
    watcher = dag.get_task("watcher")
    assert watcher.trigger_rule == TriggerRule.ONE_FAILED
    assert watcher.upstream_task_ids == {*order, "prepare_validations"}


def test_the_plugin_loads_and_only_its_entry_module_is_imported_as_a_plugin():
    from airflow import plugins_manager

    apps, _ = plugins_manager.get_fastapi_plugins()
    assert plugins_manager.get_import_errors() == {}
    assert [(a["name"], a["url_prefix"]) for a in apps] == [
        ("State stores (page and read-only query API)", "/statestore")
    ]
    views, _ = plugins_manager._get_ui_plugins()
    assert [(v["name"], v["href"], v["category"]) for v in views] == [("State stores", "statestore/", "browse")]
    # plugins/.airflowignore keeps the package's modules from being loaded again as top-level modules.
    assert "hook" not in sys.modules and "store_page" not in sys.modules
