"""The `statestore_kafka` connection: TLS and SASL from its login, password and extras; the
jobs get flags, the password only ever by their environment."""

from __future__ import annotations

import argparse
import json

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
import pytest
from airflow.sdk import Connection
from statestore_airflow import dag_support

from statestore.core import config as cfg
from statestore.core.config import KafkaConfig
from statestore.core.errors import ConfigError
from statestore.stream import job

PASSWORD = "kafka-secret-never-in-argv"


def _connection(**extra) -> Connection:
    return Connection(
        conn_id="statestore_kafka",
        conn_type="generic",
        host="k1:9093,k2",
        port=9094,
        login="app",
        password=PASSWORD,
        extra=json.dumps(
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "ssl_ca": "/ca.pem", **extra}
        ),
    )


def test_a_connection_maps_to_the_kafka_config():
    kafka = dag_support.kafka_config(_connection(check_hostname=False))
    assert kafka == KafkaConfig(
        bootstrap_servers="k1:9093,k2:9094",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="app",
        sasl_password=PASSWORD,
        kafka_ssl_ca_file="/ca.pem",
        kafka_ssl_check_hostname=False,
    )
    # A plain connection (host only) stays what it was.
    plain = Connection(conn_id="statestore_kafka", conn_type="generic", host="k1:9092")
    assert dag_support.kafka_config(plain) == KafkaConfig(bootstrap_servers="k1:9092")
    assert dag_support.kafka_args(plain) == ["--kafka-bootstrap", "k1:9092"]


def test_the_jobs_get_flags_and_the_password_by_their_environment():
    args = dag_support.kafka_args(_connection())
    assert PASSWORD not in " ".join(args) and "--kafka-password" not in args
    assert args[:2] == ["--kafka-bootstrap", "k1:9093,k2:9094"]
    assert dag_support.PASSWORD_ENV["STATESTORE_KAFKA_PASSWORD"] == "{{ conn.statestore_kafka.password or '' }}"
    # The job reads the flags, and the password Airflow renders into its environment.
    argv = ["--topic", "t", "--store", "s", "--checkpoint", "/tmp/c", *args]
    job_env = {**dag_support.PASSWORD_ENV, "STATESTORE_KAFKA_PASSWORD": PASSWORD, "STATESTORE_CASSANDRA_PASSWORD": ""}
    assert job.parse_args(argv, env=job_env).kafka == dag_support.kafka_config(_connection())


def test_a_password_file_goes_by_its_path(tmp_path):
    secret = tmp_path / "kafka.password"
    secret.write_text(PASSWORD + "\n")
    connection = _connection(password_file=str(secret))
    connection.password = None
    args = dag_support.kafka_args(connection)
    assert args[args.index("--kafka-password-file") + 1] == str(secret) and PASSWORD not in args
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, KafkaConfig)
    # The connection has no password: Airflow renders an empty one, which is none.
    job_env = {"STATESTORE_KAFKA_PASSWORD": "", "STATESTORE_KAFKA_PASSWORD_FILE": ""}
    assert cfg.from_args(KafkaConfig, parser.parse_args(args), env=job_env).sasl_password == PASSWORD


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"truststore": "/x"}, "connection 'statestore_kafka': unknown extra 'truststore'; use security_protocol"),
        ({"security_protocol": "PLAINTEXT"}, "connection 'statestore_kafka': .* need SASL"),
        ({"sasl_mechanism": "GSSAPI"}, "connection 'statestore_kafka': --kafka-sasl-mechanism"),
    ],
)
def test_a_bad_connection_is_refused_naming_it(extra, message):
    with pytest.raises(ConfigError, match=message):
        dag_support.kafka_args(_connection(**extra))


def test_the_validation_operator_hands_the_job_the_kafka_password(monkeypatch):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from statestore_airflow.operators import MaintenanceJobOperator

    monkeypatch.setenv("AIRFLOW_CONN_C", json.dumps({"conn_type": "cassandra", "host": "h", "password": "cpw"}))
    monkeypatch.setenv("AIRFLOW_CONN_K", json.dumps({"conn_type": "generic", "host": "k:9093", "password": PASSWORD}))
    monkeypatch.setattr(SparkSubmitOperator, "execute", lambda self, context: "submitted")
    validate = MaintenanceJobOperator(
        task_id="validate_idempotency", cassandra_conn_id="c", kafka_conn_id="k", application_args=["--x"]
    )
    assert validate.execute({}) == "submitted"
    assert validate.env_vars["STATESTORE_KAFKA_PASSWORD"] == PASSWORD
    assert validate.env_vars["STATESTORE_KAFKA_PASSWORD_FILE"] == ""
    assert PASSWORD not in " ".join(validate.application_args)
    other = MaintenanceJobOperator(task_id="audit_partitions", cassandra_conn_id="c", application_args=["--x"])
    other.execute({})
    assert "STATESTORE_KAFKA_PASSWORD" not in other.env_vars
