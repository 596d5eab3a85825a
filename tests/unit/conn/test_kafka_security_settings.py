"""Kafka TLS and SASL settings: what combinations KafkaConfig accepts, and how they map to
confluent-kafka's settings (client_security) and to Spark's Kafka source (spark_security)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from statestore.conn import kafka as kafka_io
from statestore.core import config as cfg
from statestore.core.config import KafkaConfig, StreamConfig
from statestore.core.errors import ConfigError
from statestore.stream import job
from tests.unit.conn.recording_reader import RecordingReader

CA = "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIEkey\n-----END PRIVATE KEY-----\n"
PASSWORD = 's3cret-"quoted"-\\back'


def _sasl_ssl(**extra) -> dict[str, str]:
    return {
        "STATESTORE_KAFKA_BOOTSTRAP": "k1:9093",
        "STATESTORE_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
        "STATESTORE_KAFKA_SASL_MECHANISM": "scram-sha-512",
        "STATESTORE_KAFKA_USERNAME": "app",
        "STATESTORE_KAFKA_PASSWORD": PASSWORD,
        **extra,
    }


@pytest.fixture
def pems(tmp_path):
    paths = {}
    for name, text in (("ca.pem", CA), ("client.pem", CERT), ("client.key", KEY)):
        (tmp_path / name).write_text(text)
        paths[name] = str(tmp_path / name)
    return paths


def test_plaintext_by_default_adds_nothing():
    kafka = cfg.resolve(KafkaConfig, env={})
    assert (kafka.security_protocol, kafka.sasl, kafka.tls) == ("PLAINTEXT", False, False)
    assert kafka_io.client_security(kafka) == {}
    assert kafka_io.spark_security(kafka) == {}


def test_sasl_ssl_maps_to_confluent_kafka(pems):
    kafka = cfg.resolve(KafkaConfig, env=_sasl_ssl(STATESTORE_KAFKA_SSL_CA=pems["ca.pem"]))
    assert (kafka.security_protocol, kafka.sasl_mechanism, kafka.sasl, kafka.tls) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        True,
        True,
    )
    assert kafka_io.client_security(kafka) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "app",
        "sasl.password": PASSWORD,
        "ssl.ca.location": pems["ca.pem"],
        "ssl.endpoint.identification.algorithm": "https",
    }


def test_ssl_with_a_client_certificate_and_no_host_check_maps_to_confluent_kafka(pems):
    env = {
        "STATESTORE_KAFKA_SECURITY_PROTOCOL": "SSL",
        "STATESTORE_KAFKA_SSL_CERT": pems["client.pem"],
        "STATESTORE_KAFKA_SSL_KEY": pems["client.key"],
        "STATESTORE_KAFKA_SSL_CHECK_HOSTNAME": "false",
    }
    assert kafka_io.client_security(cfg.resolve(KafkaConfig, env=env)) == {
        "security.protocol": "SSL",
        "ssl.certificate.location": pems["client.pem"],
        "ssl.key.location": pems["client.key"],
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_sasl_ssl_maps_to_the_spark_source_with_pem_content_and_a_scram_jaas_config(pems):
    env = _sasl_ssl(
        STATESTORE_KAFKA_SSL_CA=pems["ca.pem"],
        STATESTORE_KAFKA_SSL_CERT=pems["client.pem"],
        STATESTORE_KAFKA_SSL_KEY=pems["client.key"],
    )
    options = kafka_io.spark_security(cfg.resolve(KafkaConfig, env=env))
    assert options == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="app" '
        'password="s3cret-\\"quoted\\"-\\\\back";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.certificates": CA,
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.certificate.chain": CERT,
        "kafka.ssl.keystore.key": KEY,
        "kafka.ssl.endpoint.identification.algorithm": "https",
    }
    # No file path reaches the executors: they get the content.
    assert not any(os.sep in value and os.path.exists(value) for value in options.values())


def test_plain_uses_the_plain_login_module_and_no_host_check_is_empty():
    env = _sasl_ssl(
        STATESTORE_KAFKA_SASL_MECHANISM="PLAIN",
        STATESTORE_KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT",
    )
    options = kafka_io.spark_security(cfg.resolve(KafkaConfig, env=env))
    assert options["kafka.sasl.jaas.config"].startswith(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="'
    )
    assert "kafka.ssl.truststore.type" not in options
    ssl = cfg.resolve(KafkaConfig, env={**env, "STATESTORE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"})
    unchecked = cfg.resolve(
        KafkaConfig,
        env={**env, "STATESTORE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"},
        overrides={"kafka_ssl_check_hostname": "false"},
    )
    assert kafka_io.spark_security(ssl)["kafka.ssl.endpoint.identification.algorithm"] == "https"
    assert kafka_io.spark_security(unchecked)["kafka.ssl.endpoint.identification.algorithm"] == ""


def test_every_spark_reader_starts_from_the_security_options(pems):
    kafka = cfg.resolve(KafkaConfig, env=_sasl_ssl(STATESTORE_KAFKA_SSL_CA=pems["ca.pem"]))
    options = kafka_io.spark_source_options(kafka)
    assert options["kafka.bootstrap.servers"] == "k1:9093"
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.ssl.truststore.certificates"] == CA

    class Spark:
        readStream = RecordingReader()

    stream = cfg.resolve(
        StreamConfig, env={"STATESTORE_TOPIC": "words", "STATESTORE_STORE": "s", "STATESTORE_CHECKPOINT": "/tmp/c"}
    )
    loaded = job._kafka_source(
        Spark(), job.JobConfig(stream, cfg.resolve(cfg.CassandraConfig, env={}), kafka), "earliest"
    )
    assert loaded["kafka.sasl.jaas.config"] == kafka_io.jaas_config(kafka)
    assert loaded["kafka.sasl.mechanism"] == "SCRAM-SHA-512"


def test_a_key_spark_cannot_read_is_refused_with_the_fix(pems, tmp_path):
    rsa = tmp_path / "rsa.key"
    rsa.write_text("-----BEGIN RSA PRIVATE KEY-----\nMII\n-----END RSA PRIVATE KEY-----\n")
    env = {
        "STATESTORE_KAFKA_SECURITY_PROTOCOL": "SSL",
        "STATESTORE_KAFKA_SSL_CERT": pems["client.pem"],
        "STATESTORE_KAFKA_SSL_KEY": str(rsa),
    }
    with pytest.raises(ConfigError, match=r"not an unencrypted PKCS#8 key.*openssl pkcs8 -topk8 -nocrypt"):
        kafka_io.spark_security(cfg.resolve(KafkaConfig, env=env))
    missing = cfg.resolve(
        KafkaConfig, env={"STATESTORE_KAFKA_SECURITY_PROTOCOL": "SSL", "STATESTORE_KAFKA_SSL_CA": "/nope.pem"}
    )
    with pytest.raises(
        ConfigError, match=r"--kafka-ssl-ca / STATESTORE_KAFKA_SSL_CA: cannot read the PEM file /nope\.pem"
    ):
        kafka_io.spark_security(missing)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"STATESTORE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"},
            "SASL_SSL .* needs --kafka-sasl-mechanism .*, --kafka-username .*, a password",
        ),
        (
            {**_sasl_ssl(), "STATESTORE_KAFKA_PASSWORD": ""},  # an empty password is none
            "needs a password",
        ),
        (
            {"STATESTORE_KAFKA_USERNAME": "app", "STATESTORE_KAFKA_PASSWORD": "pw"},
            "--kafka-username, --kafka-password .* need SASL: set --kafka-security-protocol SASL_SSL",
        ),
        (
            {**_sasl_ssl(STATESTORE_KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT"), "STATESTORE_KAFKA_SSL_CA": "/ca.pem"},
            "--kafka-ssl-ca .* need TLS",
        ),
        (
            {"STATESTORE_KAFKA_SECURITY_PROTOCOL": "SSL", "STATESTORE_KAFKA_SSL_CERT": "/c.pem"},
            "needs both --kafka-ssl-cert and --kafka-ssl-key",
        ),
        (
            {"STATESTORE_KAFKA_SECURITY_PROTOCOL": "TLS"},
            "--kafka-security-protocol / STATESTORE_KAFKA_SECURITY_PROTOCOL: 'TLS' is not valid: use one of "
            "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
        ),
        (
            _sasl_ssl(STATESTORE_KAFKA_SASL_MECHANISM="GSSAPI"),
            "--kafka-sasl-mechanism / STATESTORE_KAFKA_SASL_MECHANISM: 'GSSAPI' is not valid: use one of PLAIN",
        ),
    ],
)
def test_combinations_that_cannot_work_are_refused_naming_the_settings(env, message):
    with pytest.raises(ConfigError, match=message):
        cfg.resolve(KafkaConfig, env=env)


def test_the_password_comes_from_a_file_once_and_never_shows(tmp_path):
    secret = tmp_path / "kafka.password"
    secret.write_text(PASSWORD + "\n")
    env = {**_sasl_ssl(), "STATESTORE_KAFKA_PASSWORD_FILE": str(secret)}
    del env["STATESTORE_KAFKA_PASSWORD"]
    kafka = cfg.resolve(KafkaConfig, env=env)
    assert kafka.sasl_password == PASSWORD and kafka.sasl_password_file is None
    assert PASSWORD not in repr(kafka) and PASSWORD not in str(kafka)
    # Handed on through the environment, it comes back the same (to_environment: child processes).
    assert cfg.resolve(KafkaConfig, env=cfg.to_environment(kafka)) == kafka
    with pytest.raises(ConfigError, match="give the Kafka password once"):
        cfg.resolve(KafkaConfig, env={**env, "STATESTORE_KAFKA_PASSWORD": "other"})
    with pytest.raises(ConfigError, match="--kafka-password-file / STATESTORE_KAFKA_PASSWORD_FILE: cannot read"):
        cfg.resolve(KafkaConfig, env={**env, "STATESTORE_KAFKA_PASSWORD_FILE": str(tmp_path / "missing")})
    with pytest.raises(ConfigError) as caught:
        cfg.resolve(KafkaConfig, env={**_sasl_ssl(), "STATESTORE_KAFKA_SASL_MECHANISM": "nope"})
    assert PASSWORD not in str(caught.value)


def test_flags_follow_the_precedence_chain_and_a_password_flag_warns(capsys):
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, KafkaConfig)
    args = parser.parse_args(
        [
            "--kafka-security-protocol",
            "SASL_PLAINTEXT",
            "--kafka-sasl-mechanism",
            "SCRAM-SHA-256",
            "--kafka-password",
            "x",
        ]
    )
    kafka = cfg.from_args(KafkaConfig, args, env=_sasl_ssl())
    assert (kafka.security_protocol, kafka.sasl_mechanism, kafka.sasl_password) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-256",
        "x",
    )
    warning = capsys.readouterr().err
    assert "--kafka-password is visible to other users" in warning and "STATESTORE_KAFKA_PASSWORD" in warning


def test_a_jaas_value_cannot_break_out_of_its_quotes():
    env = _sasl_ssl(STATESTORE_KAFKA_PASSWORD='a";\nother')
    with pytest.raises(ConfigError, match="must not contain line breaks"):
        kafka_io.jaas_config(cfg.resolve(KafkaConfig, env=env))


def test_the_stream_job_takes_the_password_from_its_environment_not_its_argv():
    """spark-submit jobs/wordcount_stream.py gets the security flags, the password by environment."""
    argv = ["--topic", "t", "--store", "s", "--checkpoint", "/tmp/c"]
    argv += [
        "--kafka-security-protocol",
        "SASL_SSL",
        "--kafka-sasl-mechanism",
        "SCRAM-SHA-512",
        "--kafka-username",
        "app",
    ]
    config = job.parse_args(argv, env={"STATESTORE_KAFKA_PASSWORD": PASSWORD})
    assert config.kafka.sasl_password == PASSWORD
    assert kafka_io.spark_source_options(config.kafka)["kafka.sasl.jaas.config"].endswith(
        'password="s3cret-\\"quoted\\"-\\\\back";'
    )


def test_the_job_entry_point_lists_the_security_flags():
    result = subprocess.run(
        [sys.executable, "-c", "from statestore.stream.job import parse_args; parse_args(['--help'])"],
        capture_output=True,
        text=True,
    )
    for flag in ("--kafka-security-protocol", "--kafka-sasl-mechanism", "--kafka-password-file", "--kafka-ssl-ca"):
        assert flag in result.stdout
