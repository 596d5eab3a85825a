"""The maintenance jobs' spark-submit operator: the stock SparkSubmitOperator, plus the jobs'
exit codes (statestore.maintenance.main) read as Airflow outcomes."""

from __future__ import annotations

import os
import sys

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

# 2: a configuration or store error; 3: a check failed (a partition over the fail threshold,
# a store that differs from its input). A retry would repeat the same scan and the same verdict.
FINAL_EXIT_CODES = {2: "a configuration or store error", 3: "a maintenance check failed"}


class MaintenanceJobOperator(SparkSubmitOperator):
    """Submit one maintenance job; its exit code 2 or 3 fails the task at once, without retries
    (1, an unexpected error such as an unreachable Cassandra, is retried as usual). With no
    application arguments (None: the plan gave the job no store) the task is skipped.

    The job's environment gets, when it runs: the Cassandra password of `cassandra_conn_id`
    (Airflow masks it in logs; it never reaches argv or XCom) and the worker's Python for the
    driver and executors.

    :param cassandra_conn_id: the `statestore` connection whose password the job needs
    :param kafka_conn_id: for a job that reads Kafka, the connection whose SASL password it needs
    """

    def __init__(self, *, cassandra_conn_id: str, kafka_conn_id: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.cassandra_conn_id = cassandra_conn_id
        self.kafka_conn_id = kafka_conn_id

    def execute(self, context):
        if self.application_args is None:
            raise AirflowSkipException(
                f"{self.task_id}: the plan gave it no store (its log says why each was left out)"
            )
        password = BaseHook.get_connection(self.cassandra_conn_id).password or ""
        self.env_vars = {
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or sys.executable,
            **(self.env_vars or {}),
            "STATESTORE_CASSANDRA_PASSWORD": password,
            "STATESTORE_CASSANDRA_PASSWORD_FILE": "",  # not a file the worker's environment names
        }
        if self.kafka_conn_id is not None:  # a password file of the connection comes as a flag
            kafka_password = BaseHook.get_connection(self.kafka_conn_id).password or ""
            self.env_vars |= {"STATESTORE_KAFKA_PASSWORD": kafka_password, "STATESTORE_KAFKA_PASSWORD_FILE": ""}
        try:
            return super().execute(context)
        except AirflowException as exc:
            code = exit_code_of(self._hook)
            if code in FINAL_EXIT_CODES:
                raise AirflowFailException(
                    f"{self.task_id} exited with {code}, {FINAL_EXIT_CODES[code]} (no retry: it would repeat "
                    f"the same verdict); the job's message is in the log above and its report in the report "
                    f"folder. {exc}"
                ) from exc
            raise


def exit_code_of(hook) -> int | None:
    """The exit code of the hook's finished spark-submit process (None: it never started)."""
    process = getattr(hook, "_submit_sp", None)
    return None if process is None else process.returncode
