"""state_maintenance: the scheduled maintenance jobs over every store, and their reports."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, Asset, Param, TriggerRule, chain, task
from statestore_airflow import dag_support
from statestore_airflow.operators import MaintenanceJobOperator

DOC = """
### State maintenance

Runs daily, in this order, each job through spark-submit (`jobs/<job>.py`, the same entry
points you can run by hand or with `make maintenance`):

1. **expire_state**: deletes key-value entries older than **retention**, by stream time
   (**basis** `stream`: the largest event time the stream applied) or by write time
   (`processing`). Off until you set a retention, except for a store that carries its own
   (`statestore set-retention`), which expires by it. A racing update always wins over the delete.
   **table_ttl** also sets the tables' `default_time_to_live`.
2. **compact_state**: drops versions that ended more than **history_retention** ago (versioned
   stores; off until set), removes logically deleted entries, reports tombstone pressure and
   asks Cassandra to compact a table over **tombstone_threshold** (**cassandra_compaction**).
3. **audit_partitions**: entries and bytes of every partition from a token-range scan in
   Spark tasks, against **warn_size** / **fail_size** (and entry counts), cross-checked with
   Cassandra's own figures. With **policy** `fail` a partition over fail_size fails the task.
4. **validate_idempotency**, one task per word-count or aggregate store: recounts the input up
   to the committed offsets and compares every key (an aggregate store's measure by measure),
   replays the last **replay_batches** batches on a shadow copy (word-count key-value stores,
   when the stream's checkpoint is `$STATESTORE_CHECKPOINT_DIR/<store>`), and runs the Great
   Expectations suite. A store a stream is writing right now is left out (named in
   the plan): recounting needs a store at rest.

`plan` decides which stores each job covers and logs every store it leaves out, and why; a
job with no store is skipped. **jobs** runs only the jobs named (empty: all four), such as
`["validate_idempotency"]` to re-check a store without expiring or compacting it. Each job
runs whatever happened before it. A check that fails (exit code 3) or a bad setting (2) fails
its task at once, with no retry; the run then ends failed. `publish_reports` announces the
reports written in this run as Assets (`statestore_<job>_report`; the events carry path,
status and stores).

Reports: `$STATESTORE_REPORT_DIR` (`<job>.json/.md/.html`, audit histograms per store;
validation in `validate_idempotency/<store>/` with its Data Docs). Connections:
`statestore_cassandra`, `statestore_kafka` and `spark_default`, as for `wordcount_stream`.
nodetool (for Cassandra's own figures and compaction) comes from the worker's
`STATESTORE_NODETOOL` / `STATESTORE_CASSANDRA_JMX_*` variables; without it the jobs use CQL
figures only and say in their reports what to run.
"""

JOB_ORDER = dag_support.JOB_ORDER
VALIDATE = JOB_ORDER[3]
SHARED = ("py_files", "jars", "packages", "conf")  # what every job's spark-submit takes alike
REPORTS = {job: Asset(name=f"statestore_{job}_report") for job in JOB_ORDER}
DURATION = r"^[0-9]+(\.[0-9]+)?\s*(ms|s|m|h|d|w)?$"  # a bare number is seconds
SIZE = r"^[0-9.]+\s*[A-Za-z]*$"

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
        "jobs": Param(
            [], type="array", items={"type": "string", "enum": list(JOB_ORDER)}, title="Jobs (empty: all four)"
        ),
        "retention": Param(
            None, type=["null", "string"], pattern=DURATION, title="Expire entries older than (empty: no expiry)"
        ),
        "basis": Param("stream", type="string", enum=["stream", "processing"], title="Clock of the retentions"),
        "table_ttl": Param(None, type=["null", "string"], pattern=DURATION, title="Set the tables' TTL (0: none)"),
        "dry_run": Param(False, type="boolean", title="Expire and compact: only count, change nothing"),
        "history_retention": Param(
            None, type=["null", "string"], pattern=DURATION, title="Versioned: drop versions ended before (empty: keep)"
        ),
        "tombstone_threshold": Param(0.2, type="number", minimum=0, maximum=1, title="Compact over this ratio"),
        "cassandra_compaction": Param(
            "compact",
            type="string",
            enum=["compact", "garbagecollect", "off"],
            title="Cassandra's own compaction after compacting",
        ),
        "policy": Param("fail", type="string", enum=["fail", "warn"], title="On a partition over fail_size"),
        "warn_size": Param("100MiB", type="string", pattern=SIZE, title="Warn over"),
        "fail_size": Param("400MiB", type="string", pattern=SIZE, title="Fail over"),
        "warn_entries": Param(None, type=["null", "integer"], minimum=1, title="Warn over entries per partition"),
        "fail_entries": Param(None, type=["null", "integer"], minimum=1, title="Fail over entries per partition"),
        "token_ranges": Param(64, type="integer", minimum=1, maximum=4096, title="Token ranges (Spark tasks)"),
        "flush": Param(False, type="boolean", title="Flush tables first (nodetool) for Cassandra's figures"),
        "starting_offsets": Param("earliest", type="string", title="Where the streams started reading"),
        "replay_batches": Param(3, type="integer", minimum=0, title="Batches replayed on a shadow copy"),
        "quality": Param(True, type="boolean", title="Run the Great Expectations suite"),
    },
) as dag:

    @task(multiple_outputs=True)
    def plan(params: dict) -> dict:
        """Which stores each job covers (statestore.maintenance.shared.coverage), as spark-submit arguments
        (None: the job has no store); the stores to validate; what every submission shares."""
        import logging

        from statestore_airflow.hook import CassandraStateStoreHook

        from statestore.core.names import validate_store_name
        from statestore.maintenance.shared.coverage import StoreFacts, plan_maintenance
        from statestore.maintenance.shared.selection import TimeBasis

        with dag_support.fail_without_retry():
            requested = [validate_store_name(s) for s in params["stores"]]
            hook = CassandraStateStoreHook(dag_support.CASSANDRA_CONN_ID)
            writers = hook.writers()
            facts = [StoreFacts.of(s.spec, s.progress, writers.get(s.spec.name)) for s in hook.list_stores()]
            chosen = plan_maintenance(
                facts,
                requested,
                retention_set=params["retention"] is not None,
                basis=TimeBasis(params["basis"]),
                jobs=params["jobs"],
            ).as_dict()
        for skip in chosen["skipped"]:
            logging.getLogger(__name__).info("%(job)s leaves out store %(store)s: %(reason)s", skip)
        runs = dag_support.maintenance_args(
            chosen["stores"], params, dag_support.report_dir(), dag_support.checkpoint_root()
        )
        cassandra = dag_support.cassandra_args(hook.config)
        submission = dag_support.spark_submission([], master=dag_support.spark_master())
        out = {job: (runs[job][0] + cassandra if runs[job] else None) for job in JOB_ORDER[:3]}
        out["validations"] = [args + cassandra for args in runs[VALIDATE]]
        return {**out, **{k: submission[k] for k in SHARED}, "plan": chosen}

    @task
    def prepare_validations(validations: list, py_files: str, jars: str, packages: str, conf: dict) -> list:
        """One validation run per store, reading its input from the `statestore_kafka` connection."""
        if not validations:
            return []
        from airflow.sdk import BaseHook

        with dag_support.fail_without_retry():
            kafka = dag_support.kafka_args(BaseHook.get_connection(dag_support.KAFKA_CONN_ID))
        shared = {"py_files": py_files, "jars": jars, "packages": packages, "conf": conf}
        return [{"application_args": [*args, *kafka], **shared} for args in validations]

    @task(outlets=list(REPORTS.values()), trigger_rule=TriggerRule.ALL_DONE)
    def publish_reports(dag_run=None, outlet_events=None) -> dict:
        """Announce the reports this run wrote: one Asset event per job, with paths and statuses."""
        found = dag_support.report_summaries(dag_support.report_dir(), dag_run.start_date.timestamp())
        for job, summaries in found.items():
            outlet_events[REPORTS[job]].extra = {"reports": summaries}
        return found

    @task(trigger_rule=TriggerRule.ONE_FAILED, retries=0)
    def watcher() -> None:
        """The jobs run whatever failed before them, so the run's outcome is decided here."""
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException("a maintenance task failed: see its log; the other jobs ran and reported")

    planned = plan()

    def fixed(job: str) -> dict:
        """What a job's operator is given when the DAG is parsed (the rest comes from the plan)."""
        return {
            "task_id": job,
            "conn_id": dag_support.SPARK_CONN_ID,
            "cassandra_conn_id": dag_support.CASSANDRA_CONN_ID,
            "application": str(dag_support.JOBS / f"{job}.py"),
            "name": f"statestore-{job}",
            "trigger_rule": TriggerRule.ALL_DONE,
            "durable": False,
        }

    jobs = [
        MaintenanceJobOperator(**fixed(job), application_args=planned[job], **{k: planned[k] for k in SHARED})
        for job in JOB_ORDER[:3]
    ]
    validations = prepare_validations(planned["validations"], *(planned[k] for k in SHARED))
    # Validation reads the topic: its operator hands the job the Kafka password too.
    validate = MaintenanceJobOperator.partial(**fixed(VALIDATE), kafka_conn_id=dag_support.KAFKA_CONN_ID)
    jobs.append(validate.expand_kwargs(validations))
    published = publish_reports()
    chain(*jobs, published)
    [planned, validations, *jobs, published] >> watcher()
