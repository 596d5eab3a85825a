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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import statestore
from statestore.config import CassandraConfig
from statestore.errors import CassandraUnavailableError, StateStoreError
from statestore.lease import LeaseHeldError
from statestore.spark import connector_jars

PROJECT = Path(__file__).resolve().parents[2]
JOBS = PROJECT / "jobs"
SPARK_LOG_CONFIG = PROJECT / "stack" / "spark-log4j2.properties"
CASSANDRA_CONN_ID = "statestore_cassandra"
KAFKA_CONN_ID = "statestore_kafka"
SPARK_CONN_ID = "spark_default"
# Maven coordinates of the Kafka source, for workers without local jars (same version as Spark).
KAFKA_CONNECTOR_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.3"
# The only secret of a Cassandra config: handed to spark-submit in its environment, rendered
# from the connection by Airflow (which masks it in logs and rendered fields), never in argv.
PASSWORD_ENV = {"STATESTORE_CASSANDRA_PASSWORD": "{{ conn." + CASSANDRA_CONN_ID + ".password or '' }}"}


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


def spark_submission(args: list[str], conf: dict[str, str] | None = None) -> dict[str, Any]:
    """What a SparkSubmitOperator takes from XCom: application args, --conf, --py-files, --jars
    or --packages, and the Python the driver and executors run."""
    jars = connector_jars()
    defaults = {}
    if SPARK_LOG_CONFIG.is_file():  # warnings only: Spark's INFO lines would bury the job's own log
        defaults["spark.driver.extraJavaOptions"] = f"-Dlog4j.configurationFile=file:{SPARK_LOG_CONFIG}"
    return {
        "application_args": args,
        "conf": {str(k): str(v) for k, v in {**defaults, **(conf or {})}.items()},
        "py_files": library_zip(),
        "jars": ",".join(jars),
        "packages": "" if jars else KAFKA_CONNECTOR_PACKAGE,
        # Driver and executors must run one Python minor version with the library's dependencies.
        "python": os.environ.get("PYSPARK_PYTHON") or sys.executable,
    }


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
