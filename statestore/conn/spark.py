"""SparkSession set-up shared by the jobs and the tests."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zipfile
import zipimport
from collections.abc import Mapping
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
# Fetched by scripts/install-jvm from Maven Central (stack/pom.xml, profile spark-kafka).
LOCAL_CONNECTOR_DIR = PROJECT / ".stack" / "lib" / "spark-kafka"
# Spark's log4j2 settings for the jobs' drivers: warnings only, so Spark's INFO lines do not
# bury the job's own log. Shipped in the package (spark-submit's --driver-java-options).
LOG_CONFIG = Path(__file__).with_name("spark-log4j2.properties")


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


def _runs_locally(master: str | None) -> bool:
    """Whether executors run in this process's machine: a local[...] master, given or submitted."""
    if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:
        from pyspark import SparkConf

        master = SparkConf().get("spark.master", None)
    return master is None or master.startswith("local")


# Spark's Python worker daemon, as started from the library (conn.spark_daemon's doc says why).
DAEMON_MODULE = "statestore.conn.spark_daemon"


def _workers_import_the_library() -> bool:
    """Whether local Python workers would start the library's daemon from this very library:
    they run this interpreter, in this working directory and environment, and find this
    module's sibling there, not a --py-files zip (Spark adds one to a worker's path only for its
    tasks, after the daemon started) nor another checkout. A child interpreter is asked, because a daemon that
    cannot start fails every Python task."""
    ours = Path(__file__).with_name("spark_daemon.py")
    if os.environ.get("PYSPARK_PYTHON") != sys.executable or not ours.is_file():
        return False
    probe = f"import importlib.util as u; print(u.find_spec({DAEMON_MODULE!r}).origin)"
    try:
        found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.returncode == 0 and Path(found.stdout.strip()).resolve() == ours.resolve()


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
        # Cassandra; kept apart, the tasks overlap their round trips.
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
        # The stream builds each batch's plan in Python (foreachBatch). With PySpark's DataFrame
        # debugging on, every function call (F.col, F.when, ...) also records its Python call
        # site in the JVM, several py4j round trips each: a third of the plan's building time
        # per batch (BENCHMARKS.md, windows section: what this round tried). Spark's errors
        # keep their messages, without that call site.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }
    if _runs_locally(master):
        # Local mode: the Python workers run on this machine, so the driver's interpreter (the
        # venv, which has the library) is right unless told otherwise. On a cluster it is not:
        # executors use their own machine's python3 (or spark.pyspark.python) and get the
        # library from --py-files (docs/cluster.md).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        if _workers_import_the_library():
            defaults["spark.python.daemon.module"] = DAEMON_MODULE
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # Started by spark-submit: its JVM already runs with the submitted --jars and
        # --conf; fill in only what the submitter left unset. SparkConf reads them from that
        # JVM only once this process is connected to it: before, it is empty, and the defaults
        # above overrode every --conf (`--conf spark.sql.shuffle.partitions=8` ran with 4).
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()
        submitted = SparkConf()
        defaults = {k: v for k, v in defaults.items() if not submitted.contains(k)}
    else:
        jars = connector_jars()
        if jars:
            defaults["spark.jars"] = ",".join(jars)
    for key, value in {**defaults, **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def library_archive(target: Path) -> Path:
    """Zip the statestore package (its .py files) for `spark-submit --py-files`.

    Executors on other machines import the library from this archive; Spark puts .zip files
    on their Python path (a wheel's .whl name it would not).
    """
    package = Path(__file__).resolve().parents[1]
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".zip.partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for source in sorted(package.rglob("*.py")):
            archive.write(source, source.relative_to(package.parent).as_posix())
    partial.replace(target)
    return target


# archive path -> ((modification time ns, size), its directory as zipimport read it)
_ZIP_DIRECTORIES: dict[str, tuple[tuple[int, int], dict]] = {}


def spare_zip_rereads() -> None:
    """Make importlib.invalidate_caches() cheap in this process (a Spark Python worker).

    Spark's worker calls it before every task (pyspark.worker_util.setup_spark_files), and on
    Python 3.11 every zipimporter then re-reads its archive's whole directory: a worker holds one
    importer per package it imported from pyspark.zip, so every task paid CPU that Spark's own
    JVM state stores never pay. Afterwards an archive is read again only when its file changed
    (size or modification time: what the call is there to notice, a file Spark just added), and
    once for all its importers. Python 3.12 reads lazily itself: nothing to do."""
    original = zipimport.zipimporter.invalidate_caches
    if sys.version_info >= (3, 12) or getattr(original, "spares_rereads", False):
        return

    def invalidate_caches(importer) -> None:
        try:
            status = os.stat(importer.archive)
        except OSError:
            original(importer)  # gone or unreadable: as Python would
            return
        stamp = (status.st_mtime_ns, status.st_size)
        known = _ZIP_DIRECTORIES.get(importer.archive)
        if known is not None and known[0] == stamp:
            importer._files = known[1]
            return
        original(importer)
        _ZIP_DIRECTORIES[importer.archive] = (stamp, importer._files)

    invalidate_caches.spares_rereads = True
    zipimport.zipimporter.invalidate_caches = invalidate_caches


def arrow_row(schema, row: Mapping[str, int | str]):
    """`row` as a one-row Arrow RecordBatch of `schema` (int64 and string columns; None is a
    null), for a Python worker to hand back to Spark.

    Built from buffers, not with pyarrow's `from_pylist` or `pa.array`: they import pandas, when
    it is installed, to ask whether a Python list is array-like, which slows each new Python
    worker's first task (a cold start) for nothing the apply uses."""
    import pyarrow as pa  # on the executor

    columns = []
    for field in schema:
        value = row[field.name]
        if value is None:
            columns.append(pa.nulls(1, field.type))
            continue
        if pa.types.is_int64(field.type):
            buffers = [None, pa.py_buffer(struct.pack("=q", value))]
        elif pa.types.is_string(field.type):
            data = value.encode("utf-8")
            buffers = [None, pa.py_buffer(struct.pack("=ii", 0, len(data))), pa.py_buffer(data)]
        else:
            raise TypeError(f"arrow_row builds int64 and string columns, not {field.type} ({field.name})")
        columns.append(pa.Array.from_buffers(field.type, 1, buffers))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
