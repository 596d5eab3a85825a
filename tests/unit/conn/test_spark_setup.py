"""Where the Spark session set-up finds the Kafka connector: the local stack's jars, found from
the package's own location (a moved module must still point at the project's .stack/)."""

from pathlib import Path

from statestore.conn import spark

PROJECT = Path(__file__).resolve().parents[3]


def test_the_local_connector_directory_is_the_stacks(monkeypatch):
    monkeypatch.delenv("STATESTORE_SPARK_JARS", raising=False)
    assert spark.LOCAL_CONNECTOR_DIR == PROJECT / ".stack" / "lib" / "spark-kafka"


def test_configured_jars_win_over_the_stacks(monkeypatch):
    monkeypatch.setenv("STATESTORE_SPARK_JARS", "/a.jar,,/b.jar")
    assert spark.connector_jars() == ["/a.jar", "/b.jar"]


def test_a_configured_folder_stands_for_its_jars(monkeypatch, tmp_path):
    for name in ("b.jar", "a.jar", "notes.txt"):
        (tmp_path / name).write_text("")
    monkeypatch.setenv("STATESTORE_SPARK_JARS", f"{tmp_path},/c.jar")
    assert spark.connector_jars() == [str(tmp_path / "a.jar"), str(tmp_path / "b.jar"), "/c.jar"]


def test_tls_files_missing_here_are_taken_from_what_spark_shipped(tmp_path, monkeypatch):
    from pyspark import SparkFiles

    from statestore.conn.cassandra import local_copy, tls_files
    from statestore.core import config as cfg
    from statestore.core.config import CassandraConfig

    config = cfg.resolve(
        CassandraConfig,
        env={"STATESTORE_CASSANDRA_SSL": "true", "STATESTORE_CASSANDRA_SSL_CA": "/driver/only/ca.pem"},
    )
    assert tls_files(config) == ["/driver/only/ca.pem"]
    assert tls_files(cfg.resolve(CassandraConfig, env={})) == []
    # On an executor: the driver's path does not exist here, the shipped copy does.
    monkeypatch.setattr(SparkFiles, "_is_running_on_worker", True)
    monkeypatch.setattr(SparkFiles, "_root_directory", str(tmp_path))
    assert local_copy("/driver/only/ca.pem") == "/driver/only/ca.pem"  # nothing shipped: the error names it
    (tmp_path / "ca.pem").write_text("pem")
    assert local_copy("/driver/only/ca.pem") == str(tmp_path / "ca.pem")
    existing = tmp_path / "here.pem"
    existing.write_text("pem")
    assert local_copy(str(existing)) == str(existing)
    assert local_copy(None) is None


def test_the_jobs_session_builds_batch_plans_without_recording_python_call_sites(spark):
    """The stream builds each batch's plan in Python: with PySpark's DataFrame debugging on, every
    column function also records its Python call site in the JVM (several py4j round trips each),
    so the jobs' session turns it off (a submitted --conf still wins: build_session's defaults)."""
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
