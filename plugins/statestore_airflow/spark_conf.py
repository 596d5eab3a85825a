"""Which Spark settings whoever triggers a DAG may pass (the wordcount_stream DAG's `spark_conf`
param): sizes, counts and timeouts only.

spark-submit runs on the Airflow worker, and many Spark settings carry code or where to load it
from: Java options (spark.driver.extraJavaOptions can run anything in the driver's JVM), class
names (plugins, listeners, serializers), paths and URLs (jars, files, classpaths, Python
executables), environment variables (spark.executorEnv.*). A key that is not on the list below
is refused, whatever its value; the DAG's own settings (dag_support.spark_submission's defaults)
are not user input and not checked here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statestore.core.errors import ConfigError

ALLOWED_SPARK_CONF = frozenset(
    {
        # Resources: memory, cores, executors.
        "spark.driver.memory",
        "spark.driver.memoryOverhead",
        "spark.driver.cores",
        "spark.driver.maxResultSize",
        "spark.executor.memory",
        "spark.executor.memoryOverhead",
        "spark.executor.pyspark.memory",
        "spark.executor.cores",
        "spark.executor.instances",
        "spark.cores.max",
        "spark.task.cpus",
        "spark.python.worker.memory",
        "spark.memory.fraction",
        "spark.memory.storageFraction",
        # Dynamic allocation: on or off, and its bounds.
        "spark.dynamicAllocation.enabled",
        "spark.dynamicAllocation.minExecutors",
        "spark.dynamicAllocation.maxExecutors",
        "spark.dynamicAllocation.initialExecutors",
        "spark.dynamicAllocation.executorIdleTimeout",
        # Parallelism.
        "spark.sql.shuffle.partitions",
        "spark.default.parallelism",
        "spark.sql.adaptive.enabled",
        "spark.sql.adaptive.coalescePartitions.enabled",
        # Scheduling and timeouts.
        "spark.locality.wait",
        "spark.network.timeout",
        "spark.executor.heartbeatInterval",
    }
)


def checked_spark_conf(conf: Mapping[str, Any] | None) -> dict[str, str]:
    """`conf` as spark-submit's --conf settings (values as text) if every key is allowed
    (ALLOWED_SPARK_CONF); else a ConfigError naming the refused keys and listing the allowed ones.
    Values must be plain text, numbers or booleans."""
    if conf is None:
        return {}
    if not isinstance(conf, Mapping):
        raise ConfigError(f"spark_conf must be an object of Spark settings, not {type(conf).__name__}")
    refused = sorted(str(key) for key in conf if key not in ALLOWED_SPARK_CONF)
    if refused:
        raise ConfigError(
            f"spark_conf: {', '.join(refused)} {'is' if len(refused) == 1 else 'are'} not allowed (only sizes, "
            "counts and timeouts: no Java options, class names, paths, URLs, files or environment); allowed: "
            f"{', '.join(sorted(ALLOWED_SPARK_CONF))}"
        )
    checked = {}
    for key, value in conf.items():
        if not isinstance(value, str | int | float | bool):
            raise ConfigError(f"spark_conf: {key} must be text, a number or a boolean, not {type(value).__name__}")
        checked[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return checked
