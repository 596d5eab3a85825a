"""What the DAGs hand spark-submit: flags from the connection, the library zip, the connector."""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
import pytest
from airflow.sdk import Connection
from statestore_airflow import dag_support

from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError, StateStoreError


def test_cassandra_flags_round_trip_through_the_jobs_parser_without_the_password():
    config = CassandraConfig(
        hosts=("c1", "c2"),
        port=19042,
        keyspace="analytics",
        username="app",
        password="never-in-argv",
        dml_consistency="ONE",
        allow_weak_consistency=True,  # a switch: passed as a bare flag
        ssl=True,
        ssl_ca_file="/ca.pem",
        ssl_check_hostname=False,
        request_timeout_s=30.0,
    )
    args = dag_support.cassandra_args(config)
    assert "never-in-argv" not in " ".join(args)
    assert "--cassandra-password" not in args
    # The job reads these flags, and the password from the environment PASSWORD_ENV sets.
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, CassandraConfig)
    parsed = cfg.from_args(
        CassandraConfig, parser.parse_args(args), env={"STATESTORE_CASSANDRA_PASSWORD": "never-in-argv"}
    )
    assert parsed == config


def test_a_password_file_never_reaches_argv_and_the_dags_clear_the_workers_file_setting(tmp_path):
    secret = tmp_path / "pw"
    secret.write_text("from-a-file\n")
    config = cfg.resolve(CassandraConfig, env={"STATESTORE_CASSANDRA_PASSWORD_FILE": str(secret)})
    args = dag_support.cassandra_args(config)
    assert "from-a-file" not in " ".join(args) and str(secret) not in args
    assert not any(a.startswith("--cassandra-password") for a in args)
    # A worker whose environment names a password file: the job still takes the connection's password.
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, CassandraConfig)
    worker_env = {"STATESTORE_CASSANDRA_PASSWORD_FILE": str(secret)}
    job_env = {**worker_env, **dag_support.PASSWORD_ENV, "STATESTORE_CASSANDRA_PASSWORD": "from-the-connection"}
    assert cfg.from_args(CassandraConfig, parser.parse_args(args), env=job_env).password == "from-the-connection"


def test_the_connection_wins_over_the_workers_environment():
    args = dag_support.cassandra_args(CassandraConfig(keyspace="ks"))
    assert ["--cassandra-port", "9042"] == args[args.index("--cassandra-port") :][:2]
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, CassandraConfig)
    worker_env = {
        "STATESTORE_CASSANDRA_PORT": "1111",
        "STATESTORE_KEYSPACE": "other",
        "STATESTORE_DML_CONSISTENCY": "ALL",
    }
    assert cfg.from_args(CassandraConfig, parser.parse_args(args), env=worker_env) == CassandraConfig(keyspace="ks")


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("k1", None, "k1:9092"),
        ("k1", 19092, "k1:19092"),
        ("k1:1, k2:2", None, "k1:1,k2:2"),
        ("127.0.0.1:19092", None, "127.0.0.1:19092"),
    ],
)
def test_kafka_bootstrap_from_a_connection(host, port, expected):
    assert dag_support.kafka_bootstrap(Connection(conn_id="k", conn_type="generic", host=host, port=port)) == expected


def test_a_kafka_connection_without_host_is_an_error():
    with pytest.raises(StateStoreError, match="connection 'k' names no Kafka host"):
        dag_support.kafka_bootstrap(Connection(conn_id="k", conn_type="generic"))


def test_the_library_zip_is_importable_on_its_own(tmp_path):
    path = dag_support.library_zip(tmp_path)
    names = zipfile.ZipFile(path).namelist()
    assert "statestore/store/admin.py" in names and "statestore/store/tables/base.py" in names
    # A Python that has only the zip (no installed statestore) imports the library from it.
    code = "import statestore.core.names as n, sys; print(n.__file__); sys.exit(n.validate_store_name('ok') != 'ok')"
    result = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {path!r}); {code}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(path)
    assert dag_support.library_zip(tmp_path) == path  # rebuilt in place


def test_submission_falls_back_to_maven_coordinates_without_local_jars(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.setattr(dag_support, "connector_jars", lambda: [])
    submission = dag_support.spark_submission(["--x"], {"spark.executor.memory": 2})
    assert (submission["jars"], submission["packages"]) == ("", dag_support.kafka_connector_package())
    assert submission["conf"]["spark.executor.memory"] == "2"
    assert "spark-log4j2.properties" in submission["conf"]["spark.driver.extraJavaOptions"]
    monkeypatch.setattr(dag_support, "connector_jars", lambda: ["/a.jar", "/b.jar"])
    submission = dag_support.spark_submission([])
    assert (submission["jars"], submission["packages"]) == ("/a.jar,/b.jar", "")


def test_library_mistakes_fail_without_retry_but_outages_are_retried():
    from airflow.sdk.exceptions import AirflowFailException

    from statestore.core.errors import CassandraUnavailableError
    from statestore.store.book.lease import LeaseHeldError

    with pytest.raises(AirflowFailException, match="ConfigError: bad"):
        with dag_support.fail_without_retry():
            raise ConfigError("bad")
    for retried in (CassandraUnavailableError("down"), LeaseHeldError("busy")):
        with pytest.raises(type(retried)):
            with dag_support.fail_without_retry():
                raise retried


def test_executors_get_this_python_only_on_a_local_master(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("STATESTORE_EXECUTOR_PYTHON", raising=False)
    local = dag_support.spark_submission([], master="local[2]")["conf"]
    assert local["spark.pyspark.python"] == sys.executable == local["spark.pyspark.driver.python"]
    # On a cluster this machine's path may not exist on the workers: their own python3 runs.
    remote = dag_support.spark_submission([], master="spark://master:7077")["conf"]
    assert "spark.pyspark.python" not in remote and remote["spark.pyspark.driver.python"] == sys.executable
    monkeypatch.setenv("STATESTORE_EXECUTOR_PYTHON", "/opt/python/bin/python3")
    chosen = dag_support.spark_submission([], master="spark://master:7077")["conf"]
    assert chosen["spark.pyspark.python"] == "/opt/python/bin/python3"
