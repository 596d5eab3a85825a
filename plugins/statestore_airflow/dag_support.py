"""What the DAGs need at run time (never at parse time): spark-submit arguments from the
Airflow connections, the library packaged for the executors, and where checkpoints and
reports live. Only adapters: the stream's and the jobs' own rules stay in statestore.

Settings of the worker's environment, read when a task runs:
  STATESTORE_CHECKPOINT_DIR  where stream checkpoints go (default $AIRFLOW_HOME/statestore/checkpoints)
  STATESTORE_REPORT_DIR      where maintenance reports go (default $AIRFLOW_HOME/statestore/reports)
  STATESTORE_SPARK_JARS      the Kafka connector jars (default: the local stack's, else --packages)
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import statestore
from statestore import jobs
from statestore.conn.spark import LOG_CONFIG, connector_jars
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.errors import CassandraUnavailableError, ConfigError, StateStoreError
from statestore.maintenance.shared.coverage import JOB_ORDER
from statestore.store.book.lease import LeaseHeldError

# The jobs spark-submit runs: files of the installed package (statestore.jobs), not a checkout.
JOBS = Path(jobs.__file__).resolve().parent
CASSANDRA_CONN_ID = "statestore_cassandra"
KAFKA_CONN_ID = "statestore_kafka"
SPARK_CONN_ID = "spark_default"
# The only secret of a Cassandra config: handed to spark-submit in its environment, rendered
# from the connection by Airflow (which masks it in logs and rendered fields), never in argv.
# STATESTORE_CASSANDRA_PASSWORD_FILE empty: a password file the worker's own environment names
# would clash with it (both given is refused); the connection's password is the one that counts.
PASSWORD_ENV = {
    "STATESTORE_CASSANDRA_PASSWORD": "{{ conn." + CASSANDRA_CONN_ID + ".password or '' }}",
    "STATESTORE_CASSANDRA_PASSWORD_FILE": "",
    # The Kafka SASL password likewise (kafka_args passes a connection's password_file by its path).
    "STATESTORE_KAFKA_PASSWORD": "{{ conn." + KAFKA_CONN_ID + ".password or '' }}",
    "STATESTORE_KAFKA_PASSWORD_FILE": "",
}


def _home() -> Path:
    return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow")


def checkpoint_root() -> Path:
    return Path(os.environ.get("STATESTORE_CHECKPOINT_DIR") or _home() / "statestore" / "checkpoints")


def report_dir() -> Path:
    return Path(os.environ.get("STATESTORE_REPORT_DIR") or _home() / "statestore" / "reports")


def cassandra_args(config: CassandraConfig) -> list[str]:
    """Command-line flags of the library's jobs for `config`, secrets left out (see PASSWORD_ENV).
    Every set value is passed, defaults included, so the connection wins over any STATESTORE_*
    variable of the worker (flags beat the environment); unset ones (None, a switched-off TLS)
    cannot be said with a flag and leave the worker's environment in charge."""
    args: list[str] = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.metadata["secret"] or value is None:
            continue
        if f.metadata["switch"]:
            if value:
                args.append(f.metadata["flag"])
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, tuple):
            text = ",".join(value)
        else:
            text = str(value)
        args += [f.metadata["flag"], text]
    return args


def kafka_bootstrap(conn) -> str:
    """Bootstrap servers from a connection: host may list several (h1:9092,h2:9092); a bare host
    takes the connection's port (default 9092)."""
    if not conn.host:
        raise StateStoreError(f"connection '{conn.conn_id}' names no Kafka host: set its host to host:port[,host:port]")
    servers = [s.strip() for s in conn.host.split(",") if s.strip()]
    return ",".join(s if ":" in s else f"{s}:{conn.port or 9092}" for s in servers)


KAFKA_CONN_TYPE = "statestore_kafka"  # the provider's Kafka connection type (a `generic` one works too)
# `statestore_kafka` connection extra -> KafkaConfig field; login / password are the SASL user's.
KAFKA_EXTRA_FIELDS = {
    "security_protocol": "security_protocol",
    "sasl_mechanism": "sasl_mechanism",
    "password_file": "sasl_password_file",
    "ssl_ca": "kafka_ssl_ca_file",
    "ssl_cert": "kafka_ssl_cert_file",
    "ssl_key": "kafka_ssl_key_file",
    "check_hostname": "kafka_ssl_check_hostname",
}


def connection_extras(conn, conn_type: str, known: Mapping[str, str]) -> dict[str, Any]:
    """A connection's extras by their plain names (the connection form of the provider's
    `conn_type` may save them as extra__<conn_type>__<name>); an unknown one is an error
    naming the `known` ones."""
    prefix = f"extra__{conn_type}__"
    extras = {k.removeprefix(prefix): v for k, v in (conn.extra_dejson or {}).items()}
    unknown = sorted(set(extras) - set(known))
    if unknown:
        raise ConfigError(
            f"connection '{conn.conn_id}': unknown extra {', '.join(map(repr, unknown))}; use {', '.join(known)}"
        )
    return extras


def _kafka_settings(conn) -> dict[str, str]:
    """The KafkaConfig fields a Kafka connection gives, as text (no I/O, not validated)."""
    extras = connection_extras(conn, KAFKA_CONN_TYPE, KAFKA_EXTRA_FIELDS)
    given = {"bootstrap_servers": kafka_bootstrap(conn), "sasl_username": conn.login, "sasl_password": conn.password}
    given.update({KAFKA_EXTRA_FIELDS[k]: v for k, v in extras.items()})
    text = {True: "true", False: "false"}
    return {k: text.get(v, str(v)) if isinstance(v, bool) else str(v) for k, v in given.items() if v not in (None, "")}


def kafka_config(conn) -> KafkaConfig:
    """The KafkaConfig a `statestore_kafka` connection describes: host the bootstrap servers,
    login / password the SASL user, extra security_protocol, sasl_mechanism, password_file,
    ssl_ca, ssl_cert, ssl_key, check_hostname. Only the connection counts (no STATESTORE_*
    variable of the worker); values are checked as the library's own settings are."""
    try:
        return cfg.resolve(KafkaConfig, env={}, overrides=_kafka_settings(conn))
    except ConfigError as exc:
        raise ConfigError(f"connection '{conn.conn_id}': {exc}") from None


def kafka_args(conn) -> list[str]:
    """The jobs' Kafka flags for a `statestore_kafka` connection (checked with kafka_config), the
    password left out: it goes by the environment (PASSWORD_ENV), a password file by its path."""
    kafka_config(conn)
    flags = {f.name: f.metadata["flag"] for f in dataclasses.fields(KafkaConfig) if not f.metadata["secret"]}
    return [a for name, value in _kafka_settings(conn).items() if name in flags for a in (flags[name], value)]


def library_zip(target_dir: Path | None = None) -> str:
    """The statestore package as a zip for spark-submit --py-files, so executors run the same
    library as the driver. Rebuilt on every call (a few hundred KB) and swapped in atomically."""
    target_dir = target_dir or _home() / "statestore"
    target_dir.mkdir(parents=True, exist_ok=True)
    package = Path(statestore.__file__).resolve().parent
    target = target_dir / f"statestore-{statestore.__version__}.zip"
    with tempfile.NamedTemporaryFile(dir=target_dir, suffix=".zip", delete=False) as tmp:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(package.rglob("*.py")):
                archive.write(path, Path("statestore") / path.relative_to(package))
    os.replace(tmp.name, target)
    return str(target)


def kafka_connector_package() -> str:
    """Maven coordinates of Spark's Kafka source for workers without local jars: the version of
    the pyspark installed here, which the connector must match."""
    from importlib.metadata import version

    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version('pyspark')}"


def spark_master() -> str | None:
    """The master of the `spark_default` connection (at run time: it reads the connection)."""
    from airflow.sdk import BaseHook

    return BaseHook.get_connection(SPARK_CONN_ID).host


def spark_submission(args: list[str], conf: dict[str, str] | None = None, master: str | None = None) -> dict[str, Any]:
    """What a SparkSubmitOperator takes from XCom: application args, --conf, --py-files, --jars
    or --packages, and the Python the driver runs.

    Executors run STATESTORE_EXECUTOR_PYTHON if set; else, for a local master (or none given),
    this Python; else their own machines' python3 with the library from --py-files: a path
    that exists here need not exist on a worker (docs/cluster.md).
    """
    jars = connector_jars()
    defaults = {"spark.pyspark.driver.python": sys.executable}
    if LOG_CONFIG.is_file():  # warnings only: Spark's INFO lines would bury the job's own log
        defaults["spark.driver.extraJavaOptions"] = f"-Dlog4j.configurationFile={LOG_CONFIG.as_uri()}"
    executor_python = os.environ.get("STATESTORE_EXECUTOR_PYTHON")
    if executor_python is None and (master is None or master.startswith("local")):
        executor_python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    if executor_python:
        defaults["spark.pyspark.python"] = executor_python
    return {
        "application_args": args,
        "conf": {str(k): str(v) for k, v in {**defaults, **(conf or {})}.items()},
        "py_files": library_zip(),
        "jars": ",".join(jars),
        "packages": "" if jars else kafka_connector_package(),
        "python": sys.executable,
    }


def topic_param(default: str) -> Any:
    """The trigger form's Kafka topic of a DAG that runs a stream (its name as Kafka allows it)."""
    from airflow.sdk import Param

    return Param(default, type="string", pattern=r"^[A-Za-z0-9._-]{1,249}$", title="Kafka topic")


def store_param(default: str) -> Any:
    """The trigger form's store of a DAG that runs a stream into it."""
    from airflow.sdk import Param

    return Param(
        default,
        type="string",
        pattern=r"^[a-z][a-z0-9_]{0,31}$",
        title="Store",
        description="1-32 characters of a-z, 0-9 and _, starting with a letter",
    )


def trigger_param() -> Any:
    """The trigger form's stream trigger: once over what the topic holds, or every interval."""
    from airflow.sdk import Param

    return Param(
        "available-now",
        type="string",
        pattern=r"^(available-now|[0-9]+(\.[0-9]+)?(ms|s|m|h))$",
        title="Trigger",
        description="available-now, or an interval such as 10s (runs until stopped)",
    )


def checkpoint_param() -> Any:
    """The trigger form's Spark checkpoint location (empty: one per store under the checkpoint root)."""
    from airflow.sdk import Param

    return Param(
        None,
        type=["null", "string"],
        title="Checkpoint location",
        description="empty: $STATESTORE_CHECKPOINT_DIR/<store>",
    )


def spark_submit_task(task_id: str, job: str, name: str, submission: Any) -> Any:
    """The SparkSubmitOperator of a DAG that runs `job` (a file of jobs/) as `name`, with what its
    prepare task returned (`submission`: spark_submission's dict, as the XCom reference the
    operator resolves when it runs). The driver runs this Python (the executors' is
    spark.pyspark.python in the conf, if any) under spark-submit in client mode: there is no
    remote job to reconnect to."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator(
        task_id=task_id,
        conn_id=SPARK_CONN_ID,
        application=str(JOBS / job),
        name=name,
        application_args=submission["application_args"],
        py_files=submission["py_files"],
        jars=submission["jars"],
        packages=submission["packages"],
        conf=submission["conf"],
        env_vars={"PYSPARK_DRIVER_PYTHON": submission["python"], **PASSWORD_ENV},
        durable=False,
    )


@contextmanager
def fail_without_retry() -> Iterator[None]:
    """Library errors that a retry cannot fix (bad names or options, a missing store, a missing
    confirmation) fail the task at once; an unreachable Cassandra or a busy store is retried."""
    from airflow.sdk.exceptions import AirflowFailException

    try:
        yield
    except (CassandraUnavailableError, LeaseHeldError):
        raise
    except StateStoreError as exc:
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc


def maintenance_args(
    stores: dict[str, list[str]], params: dict[str, Any], reports: Path, checkpoints: Path
) -> dict[str, list[list[str]]]:
    """The command lines of the maintenance jobs for the planned `stores` of each job
    (statestore.maintenance.shared.coverage), from the state_maintenance params; Cassandra and Kafka
    flags are added by the caller. One run per job over all its stores, except validation:
    one run per store (each has its own input, checkpoint and report folder)."""
    ranges = ["--token-ranges", str(params["token_ranges"])]
    dry = ["--dry-run"] if params["dry_run"] else []

    def over(job: str) -> list[str]:
        return [a for store in stores.get(job, []) for a in ("--store", store)]

    runs: dict[str, list[list[str]]] = {}
    if stores.get("expire_state"):
        args = ["--report-dir", str(reports), *over("expire_state"), "--basis", params["basis"], *ranges, *dry]
        if params["retention"] is not None:  # window stores expire by their own retention
            args += ["--retention", params["retention"]]
        if params["table_ttl"] is not None:
            args += ["--table-ttl", params["table_ttl"]]
        runs["expire_state"] = [args]
    if stores.get("compact_state"):
        args = ["--report-dir", str(reports), *over("compact_state"), "--basis", params["basis"]]
        args += ["--tombstone-threshold", str(params["tombstone_threshold"])]
        args += ["--cassandra-compaction", params["cassandra_compaction"], *ranges, *dry]
        if params["history_retention"] is not None:
            args += ["--history-retention", params["history_retention"]]
        runs["compact_state"] = [args]
    if stores.get("audit_partitions"):
        args = ["--report-dir", str(reports), *over("audit_partitions"), "--policy", params["policy"]]
        args += ["--warn-size", params["warn_size"], "--fail-size", params["fail_size"], *ranges]
        for flag, key in (("--warn-entries", "warn_entries"), ("--fail-entries", "fail_entries")):
            if params[key] is not None:
                args += [flag, str(params[key])]
        if params["flush"]:
            args.append("--flush")
        runs["audit_partitions"] = [args]
    validations = []
    for store in stores.get("validate_idempotency", []):
        args = ["--report-dir", str(reports / "validate_idempotency" / store), "--store", store, *ranges]
        args += ["--starting-offsets", params["starting_offsets"], "--replay-batches", str(params["replay_batches"])]
        if (checkpoints / store).is_dir():  # the wordcount_stream DAG's default checkpoint
            args += ["--checkpoint", str(checkpoints / store)]
        if not params["quality"]:
            args.append("--no-quality")
        validations.append(args)
    runs["validate_idempotency"] = validations
    return {job: runs.get(job, []) for job in JOB_ORDER}


def report_summaries(reports: Path, since: float) -> dict[str, list[dict[str, Any]]]:
    """The maintenance reports written at or after `since` (epoch seconds), by job: path,
    status and generation time of each (validation: one per store)."""
    import json

    found: dict[str, list[dict[str, Any]]] = {}
    for job in JOB_ORDER:
        paths = [reports / f"{job}.json", *sorted((reports / job).glob(f"*/{job}.json"))]
        for path in paths:
            if not path.is_file() or path.stat().st_mtime < since:
                continue
            report = json.loads(path.read_text())
            found.setdefault(job, []).append(
                {
                    "path": str(path),
                    "status": report.get("status", "done"),
                    "generated_at": report.get("generated_at"),
                    "stores": [s.get("store") for s in report.get("stores", [])] or [report.get("store")],
                }
            )
    return found
