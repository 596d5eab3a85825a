"""state_maintenance: the scheduled maintenance jobs over every store, and their reports."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Asset, Param, TriggerRule, chain, task
from statestore_airflow import dag_support

DOC = """
### State maintenance

Runs daily, in this order: **expire** old entries, **compact** versioned stores, **audit**
the partitions of every store, **validate** idempotency; then publishes the reports as the
Asset `statestore_audit_partitions_report` (its events carry the report's path and status).

What runs today:

- `audit_partitions`: `jobs/audit_partitions.py` through spark-submit (token ranges scanned
  in parallel Spark tasks). Reports `audit_partitions.json/.md/.html` and a histogram PNG per
  store in `$STATESTORE_REPORT_DIR`. With **policy** `fail` the task fails when a partition
  is over **fail_size**; with `warn` it reports and succeeds.
- `expire_state`, `compact_state`, `validate_idempotency`: the jobs exist
  (`jobs/expire_state.py`, `jobs/compact_state.py`, `jobs/validate_idempotency.py`, runnable
  with spark-submit or `make maintenance`) but are **not wired into this DAG yet**; these tasks
  are skipped with that message, so a run never claims work it did not do.

Connections: `statestore_cassandra` and `spark_default`, as for `wordcount_stream`.
nodetool (for Cassandra's own figures) comes from the worker's `STATESTORE_NODETOOL` /
`STATESTORE_CASSANDRA_JMX_*` variables; without it the audit uses CQL figures only.
"""

AUDIT_REPORT = Asset(name="statestore_audit_partitions_report")
# The maintenance jobs in order; None: the job is not part of this build yet.
JOBS = {
    "expire_state": None,
    "compact_state": None,
    "audit_partitions": "audit_partitions.py",
    "validate_idempotency": None,
}

with DAG(
    dag_id="state_maintenance",
    description="Expire, compact, audit and validate the Cassandra state stores; publish the reports",
    doc_md=DOC,
    schedule="30 3 * * *",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["statestore", "maintenance", "spark"],
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2), "owner": "statestore"},
    params={
        "stores": Param([], type="array", items={"type": "string"}, title="Stores (empty: every store)"),
        "policy": Param("fail", type="string", enum=["fail", "warn"], title="On a partition over fail_size"),
        "warn_size": Param("100MiB", type="string", pattern=r"^[0-9.]+\s*[A-Za-z]*$", title="Warn over"),
        "fail_size": Param("400MiB", type="string", pattern=r"^[0-9.]+\s*[A-Za-z]*$", title="Fail over"),
        "token_ranges": Param(64, type="integer", minimum=1, maximum=4096, title="Token ranges (Spark tasks)"),
        "flush": Param(False, type="boolean", title="Flush tables first (nodetool) for Cassandra's figures"),
    },
) as dag:

    @task(multiple_outputs=True)
    def prepare_audit(params: dict) -> dict:
        from statestore_airflow.hook import CassandraStateStoreHook

        from statestore.names import validate_store_name

        with dag_support.fail_without_retry():
            stores = [validate_store_name(s) for s in params["stores"]]
            cassandra = CassandraStateStoreHook(dag_support.CASSANDRA_CONN_ID).config
        args = ["--report-dir", str(dag_support.report_dir()), "--policy", params["policy"]]
        args += ["--warn-size", params["warn_size"], "--fail-size", params["fail_size"]]
        args += ["--token-ranges", str(params["token_ranges"])]
        args += [a for store in stores for a in ("--store", store)]
        if params["flush"]:
            args.append("--flush")
        return dag_support.spark_submission(args + dag_support.cassandra_args(cassandra))

    def not_built(job: str):
        @task(task_id=job, trigger_rule=TriggerRule.NONE_FAILED)
        def skip() -> None:
            from airflow.sdk.exceptions import AirflowSkipException

            raise AirflowSkipException(
                f"{job}: not wired into this DAG yet (run jobs/{job}.py or `make maintenance`); nothing was done"
            )

        return skip()

    @task(outlets=[AUDIT_REPORT], trigger_rule=TriggerRule.NONE_FAILED)
    def publish_reports(outlet_events=None) -> dict:
        """Announce the audit report (an Asset event with its path and status)."""
        import json

        path = dag_support.report_dir() / "audit_partitions.json"
        report = json.loads(path.read_text())
        summary = {
            "path": str(path),
            "status": report.get("status"),
            "generated_at": report.get("generated_at"),
            "stores": {s.get("store"): s.get("level") for s in report.get("stores", [])},
        }
        outlet_events[AUDIT_REPORT].extra = summary
        return summary

    submission = prepare_audit()
    steps = []
    for job, application in JOBS.items():
        if application is None:
            steps.append(not_built(job))
            continue
        steps.append(
            SparkSubmitOperator(
                task_id=job,
                conn_id=dag_support.SPARK_CONN_ID,
                application=str(dag_support.JOBS / application),
                name=f"statestore-{job}",
                application_args=submission["application_args"],
                py_files=submission["py_files"],
                conf=submission["conf"],
                env_vars={"PYSPARK_PYTHON": submission["python"], **dag_support.PASSWORD_ENV},
                trigger_rule=TriggerRule.NONE_FAILED,
                durable=False,
            )
        )
    chain(*steps, publish_reports())
