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
