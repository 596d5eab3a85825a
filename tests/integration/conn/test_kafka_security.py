"""Kafka with TLS and SASL (SCRAM-SHA-512), end to end, on a second throwaway broker.

The broker is started once for the module with `stack up --only kafka --kafka-sasl-ssl` in its
own STATESTORE_STACK_DIR and ports, and always stopped again. Its only client listener speaks
SASL_SSL; the tests log in as the stack's SCRAM user `statestore` (random password in a 0600
file) and check that the password never shows up in an error, a log record or the output.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from statestore.cli.main import main as cli_main
from statestore.conn import kafka as kafka_io
from statestore.core import config as cfg
from statestore.core.config import KafkaConfig
from statestore.core.errors import KafkaError
from tests.corpus import generate
from tests.integration.conftest import dump, free_port, run_stack, run_stream

PROJECT = Path(__file__).resolve().parents[3]


def _all_text(exc: BaseException) -> str:
    """Everything a user could see of an exception: message, repr, full traceback with causes."""
    return "\n".join([str(exc), repr(exc), "".join(traceback.format_exception(exc))])


@dataclass(frozen=True)
class SecureBroker:
    state: Path
    env: dict  # the stack's own settings (state dir, ports)
    settings: dict  # a client's STATESTORE_KAFKA_* settings, as `stack env` prints them
    up_output: str

    @property
    def password(self) -> str:
        return Path(self.settings["STATESTORE_KAFKA_PASSWORD_FILE"]).read_text().strip()

    def config(self, **overrides) -> KafkaConfig:
        """A client config for this broker (the `stack env` settings), with field overrides."""
        return cfg.resolve(KafkaConfig, env=self.settings, overrides=overrides)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    state = tmp_path_factory.mktemp("kafka-sasl-ssl-stack")
    (state / "lib").mkdir()
    (state / "lib" / "kafka").symlink_to(PROJECT / ".stack" / "lib" / "kafka")
    env = {
        "STATESTORE_STACK_DIR": str(state),
        "STATESTORE_KAFKA_PORT": str(free_port()),
        "STATESTORE_KAFKA_CONTROLLER_PORT": str(free_port()),
    }
    try:
        up = run_stack("up", "--only", "kafka", "--kafka-sasl-ssl", env=env)
        assert up.returncode == 0, up.stdout + up.stderr
        printed = run_stack("env", env=env)
        assert printed.returncode == 0, printed.stderr
        settings = dict(
            line.removeprefix("export ").split("=", 1) for line in printed.stdout.splitlines() if "KAFKA" in line
        )
        yield SecureBroker(state, env, settings, up.stdout + up.stderr + printed.stdout + printed.stderr)
    finally:
        down = run_stack("down", "--only", "kafka", env=env)
    assert "kafka: stopped" in down.stdout, down.stdout + down.stderr
    shutil.rmtree(state / "data", ignore_errors=True)  # keep the logs, drop the data files


def test_the_broker_runs_sasl_ssl_only_and_keeps_its_secrets(broker):
    assert json.loads((broker.state / "run" / "kafka.mode.json").read_text()) == {"sasl_ssl": True}
    assert broker.settings["STATESTORE_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert broker.settings["STATESTORE_KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512"
    assert broker.settings["STATESTORE_KAFKA_SSL_CA"] == str(broker.state / "tls" / "ca.pem")
    status = run_stack("status", "--only", "kafka", env=broker.env)
    assert status.returncode == 0 and "answering" in status.stdout, status.stdout + status.stderr
    plain = run_stack("up", "--only", "kafka", env=broker.env)
    assert "kafka: already running (started with --kafka-sasl-ssl" in plain.stdout
    # The key material and the passwords are private, and no output or log of the broker holds them.
    private = [
        broker.state / "tls" / "keystore.p12",
        broker.state / "tls" / "keystore.password",
        broker.state / "run" / "kafka-server.properties",
        *sorted((broker.state / "data" / "kafka-sasl-ssl-users").iterdir()),
    ]
    assert len(private) == 5
    for path in private:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    secrets = [broker.password, (broker.state / "tls" / "keystore.password").read_text().strip()]
    secrets.append((broker.state / "data" / "kafka-sasl-ssl-users" / "broker.password").read_text().strip())
    assert all(len(secret) >= 32 for secret in secrets)
    seen = broker.up_output + status.stdout + status.stderr + plain.stdout + plain.stderr
    for log in (broker.state / "logs").rglob("*"):
        if log.is_file():
            seen += log.read_text(errors="replace")
    assert not [secret for secret in secrets if secret in seen]
    assert not list((broker.state / "run").glob("*.args"))  # the format tool's argument file is gone


def test_produce_and_create_topic_through_the_cli_with_sasl_ssl(broker, monkeypatch, capfd, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    for name, value in broker.settings.items():
        monkeypatch.setenv(name, value)
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    assert cli_main(["create-topic", topic, "--partitions", "3"]) == 0
    config = broker.config()
    assert kafka_io.partition_count(config, topic) == 3
    lines = tmp_path / "lines.txt"
    lines.write_text("alpha beta\ngamma\n\ndelta alpha\n")
    assert cli_main(["produce", topic, str(lines)]) == 0
    out, err = capfd.readouterr()
    assert "produced 4 message(s)" in err
    assert sum(kafka_io.end_offsets(config, topic).values()) == 4
    assert broker.password not in out + err + caplog.text


def test_a_wrong_password_fails_clearly_sends_nothing_and_is_never_shown(broker, monkeypatch, capfd, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    kafka_io.ensure_topic(broker.config(), topic, 2)
    wrong = f"not-the-password-{uuid.uuid4().hex}"
    with pytest.raises(KafkaError) as caught:
        kafka_io.produce(broker.config(sasl_password_file="", sasl_password=wrong), topic, [b"never sent"])
    assert "refused the SASL login of user 'statestore' with SCRAM-SHA-512" in str(caught.value)
    # The same through the CLI, configured by the environment only.
    for name, value in broker.settings.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("STATESTORE_KAFKA_PASSWORD_FILE")
    monkeypatch.setenv("STATESTORE_KAFKA_PASSWORD", wrong)
    lines = tmp_path / "lines.txt"
    lines.write_text("one line\nanother\n")
    capfd.readouterr()
    assert cli_main(["produce", topic, str(lines)]) == 5  # unavailable: Kafka refused the login
    out, err = capfd.readouterr()
    assert "statestore: Kafka at 127.0.0.1:" in err and "refused the SASL login of user 'statestore'" in err
    assert "STATESTORE_KAFKA_PASSWORD" in err
    assert sum(kafka_io.end_offsets(broker.config(), topic).values()) == 0  # nothing was sent
    seen = "\n".join([_all_text(caught.value), caplog.text, out, err])
    assert wrong not in seen and broker.password not in seen


def test_without_tls_or_its_ca_the_client_fails_clearly(broker):
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    # SASL without TLS: the broker's TLS listener hangs up before answering.
    with pytest.raises(KafkaError) as plaintext:
        kafka_io.ensure_topic(broker.config(security_protocol="SASL_PLAINTEXT", kafka_ssl_ca_file=""), topic, 1)
    message = str(plaintext.value)
    assert "closed the connection before answering" in message
    assert "STATESTORE_KAFKA_SECURITY_PROTOCOL=SASL_SSL" in message and "STATESTORE_KAFKA_SSL_CA" in message
    # TLS with no CA file: the self-signed certificate is checked against the system CAs.
    with pytest.raises(KafkaError) as untrusted:
        kafka_io.produce(broker.config(kafka_ssl_ca_file=""), topic, [b"never sent"])
    message = str(untrusted.value)
    assert "TLS with Kafka at" in message and "certificate verify failed" in message
    assert "the system CAs (no --kafka-ssl-ca given)" in message and "--kafka-ssl-ca" in message
    for exc in (plaintext.value, untrusted.value):
        assert broker.password not in _all_text(exc)
    assert kafka_io.partition_count(broker.config(), topic) is None  # neither created the topic


@pytest.fixture(scope="module")
def client_cert(broker, tmp_path_factory) -> tuple[Path, Path]:
    """A client certificate the broker trusts: the stack's own certificate (ca.pem) and its key,
    exported from the keystore as unencrypted PKCS#8 (its password through the environment)."""
    folder = tmp_path_factory.mktemp("client-cert")
    tls = broker.state / "tls"
    env = {**os.environ, "STATESTORE_KEYSTORE_PASSWORD": (tls / "keystore.password").read_text().strip()}
    argv = ["openssl", "pkcs12", "-in", str(tls / "keystore.p12"), "-nocerts", "-nodes"]
    exported = subprocess.run(
        [*argv, "-passin", "env:STATESTORE_KEYSTORE_PASSWORD"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    key = folder / "client.key"
    begin, end = "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----"
    key.write_text(exported[exported.index(begin) : exported.index(end) + len(end)] + "\n")
    key.chmod(0o600)
    return tls / "ca.pem", key


def test_the_stream_reads_the_secured_broker_and_counts_exactly(
    broker, client_cert, spark, session, keyspace, cassandra_config, store_name, tmp_path, capfd, caplog
):
    caplog.set_level(logging.INFO)
    cert, key = client_cert
    # TLS with a client certificate (the broker requests one), and the SCRAM login.
    kafka = broker.config(kafka_ssl_cert_file=str(cert), kafka_ssl_key_file=str(key))
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    assert kafka_io.ensure_topic(kafka, topic, 2) == 2
    lines, truth = generate(400, seed=29)
    assert kafka_io.produce(kafka, topic, (line.encode() for line in lines)) == len(lines)
    capfd.readouterr()
    run_stream(spark, cassandra_config, kafka, topic, store_name, tmp_path / "cp")
    assert dump(session, keyspace, store_name) == dict(truth)
    out, err = capfd.readouterr()
    assert broker.password not in out + err + caplog.text
