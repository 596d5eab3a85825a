"""SparkSession set-up shared by the jobs and the tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
# Fetched by scripts/install-jvm from Maven Central (stack/pom.xml, profile spark-kafka).
LOCAL_CONNECTOR_DIR = PROJECT / ".stack" / "lib" / "spark-kafka"


def connector_jars() -> list[str]:
    """The Kafka connector jars: STATESTORE_SPARK_JARS (comma-separated jars, or folders that
    stand for the jars in them, as in the project's image), else the local stack's."""
    configured = os.environ.get("STATESTORE_SPARK_JARS")
    if configured:
        jars: list[str] = []
        for entry in (e for e in configured.split(",") if e):
            folder = Path(entry)
            jars += sorted(str(j) for j in folder.glob("*.jar")) if folder.is_dir() else [entry]
        return jars
    return sorted(str(j) for j in LOCAL_CONNECTOR_DIR.glob("*.jar"))


def build_session(app_name: str, master: str | None = None, conf: dict[str, str] | None = None):
    """A SparkSession; under spark-submit the submitted settings win over these defaults."""
    # pyspark is imported only here: dag_support imports this module (connector_jars) when
    # Airflow parses the DAGs, which must stay quick and need no Spark.
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    defaults = {
        # The job keeps no Spark state: a handful of shuffle partitions suits the per-batch
        # aggregation on small clusters; raise it with --conf for large ones.
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.showConsoleProgress": "false",
        # Inside foreachBatch, adaptive execution would merge the aggregation's few, small
        # shuffle partitions into one task, so one Python worker applied the whole batch to
        # Cassandra; kept apart, the tasks overlap their round trips (BENCHMARKS.md, run B).
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
    }
    # Python workers run the driver's interpreter (the venv, which has the library) unless
    # told otherwise; PySpark reads this variable when it creates the SparkContext.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # Started by spark-submit: its JVM already runs with the submitted --jars and
        # --conf; fill in only what the submitter left unset.
        from pyspark import SparkConf

        submitted = SparkConf()
        defaults = {k: v for k, v in defaults.items() if not submitted.contains(k)}
    else:
        jars = connector_jars()
        if jars:
            defaults["spark.jars"] = ",".join(jars)
    for key, value in {**defaults, **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
