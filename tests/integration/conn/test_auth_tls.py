"""Cassandra with PasswordAuthenticator and TLS, end to end, on a second throwaway node.

The node is started once for the module with `stack up --only cassandra --auth --tls` in its own
STATESTORE_STACK_DIR and ports, and always stopped again. The tests log in as an application
role with a random password (never the well-known cassandra/cassandra) and check that neither
that password nor the keystore's ever shows up in an error, a log record or the output.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import stat
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from statestore.cli.main import main as cli_main
from statestore.conn.cassandra import build_cluster, create_keyspace, session_for
from statestore.core import config as cfg
from statestore.core.codecs import encode_text
from statestore.core.config import CassandraConfig
from statestore.core.errors import CassandraUnavailableError
from statestore.core.model import StoreSpec, StoreType
from statestore.store.provision import provision_store
from statestore.stream.apply import Delta, apply_deltas
from tests.integration.conftest import free_port, run_stack

PROJECT = Path(__file__).resolve().parents[3]
APP_ROLE = "statestore_app"


@dataclass(frozen=True)
class SecureNode:
    state: Path
    env: dict
    port: int
    ca_pem: Path
    up_output: str

    @property
    def keystore_password(self) -> str:
        return (self.state / "tls" / "keystore.password").read_text().strip()

    def config(self, **overrides) -> CassandraConfig:
        """A config for this node: TLS with the exported CA and hostname checks unless overridden."""
        values = {"port": str(self.port), "ssl": "true", "ssl_ca_file": str(self.ca_pem), "request_timeout_s": "10"}
        return cfg.resolve(CassandraConfig, env={}, overrides={**values, **overrides})


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    state = tmp_path_factory.mktemp("auth-tls-stack")
    (state / "lib").mkdir()
    (state / "lib" / "cassandra").symlink_to(PROJECT / ".stack" / "lib" / "cassandra")
    port = free_port()
    env = {
        "STATESTORE_STACK_DIR": str(state),
        "STATESTORE_CASSANDRA_PORT": str(port),
        "STATESTORE_CASSANDRA_STORAGE_PORT": str(free_port()),
        "STATESTORE_CASSANDRA_JMX_PORT": str(free_port()),
    }
    try:
        up = run_stack("up", "--only", "cassandra", "--auth", "--tls", env=env)
        assert up.returncode == 0, up.stdout + up.stderr
        yield SecureNode(state, env, port, state / "tls" / "ca.pem", up.stdout + up.stderr)
    finally:
        down = run_stack("down", "--only", "cassandra", env=env)
    assert "cassandra: stopped" in down.stdout, down.stdout + down.stderr
    shutil.rmtree(state / "data", ignore_errors=True)  # keep the logs, drop the data files


@pytest.fixture(scope="module")
def app_role(node):
    """A login role with a random password that may create keyspaces (and so owns what it makes)."""
    password = f"pw-{uuid.uuid4().hex}"
    # The superuser over "localhost": the certificate must name it too (SAN DNS:localhost).
    admin = build_cluster(node.config(hosts="localhost", username="cassandra", password="cassandra"))
    try:
        session = admin.connect()
        session.execute(f"CREATE ROLE {APP_ROLE} WITH LOGIN = true AND PASSWORD = %s", (password,))
        session.execute(f"GRANT CREATE ON ALL KEYSPACES TO {APP_ROLE}")
    finally:
        admin.shutdown()
    return APP_ROLE, password


def _all_text(exc: BaseException) -> str:
    """Everything a user could see of an exception: message, repr, full traceback with causes."""
    return "\n".join([str(exc), repr(exc), "".join(traceback.format_exception(exc))])


def test_the_node_runs_in_the_recorded_mode_and_status_probes_it(node):
    assert json.loads((node.state / "run" / "cassandra.mode.json").read_text()) == {"auth": True, "tls": True}
    status = run_stack("status", "--only", "cassandra", env=node.env)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "answering" in status.stdout
    again = run_stack("up", "--only", "cassandra", "--auth", "--tls", env=node.env)
    assert again.returncode == 0 and again.stdout.strip() == "cassandra: already running"
    plain = run_stack("up", "--only", "cassandra", env=node.env)
    assert "already running (started with --auth --tls" in plain.stdout
    # The key material is private, and its password is in no output or log of the node.
    for name in ("keystore.p12", "keystore.password"):
        assert stat.S_IMODE((node.state / "tls" / name).stat().st_mode) == 0o600
    assert stat.S_IMODE((node.state / "run" / "cassandra.yaml").stat().st_mode) == 0o600
    secret = node.keystore_password
    assert len(secret) >= 32
    assert secret not in node.up_output + status.stdout + status.stderr + again.stdout + plain.stdout
    for log in (node.state / "logs").rglob("*"):
        if log.is_file():
            assert secret not in log.read_text(errors="replace"), log


def test_without_credentials_authentication_fails_clearly(node):
    with pytest.raises(CassandraUnavailableError) as caught:
        session_for(node.config())
    message = str(caught.value)
    assert "authentication failed for no user" in message
    assert "STATESTORE_CASSANDRA_USERNAME / STATESTORE_CASSANDRA_PASSWORD" in message


def test_a_wrong_password_fails_clearly_and_is_never_shown(node, app_role, caplog, capfd, monkeypatch):
    caplog.set_level(logging.DEBUG)
    user, _ = app_role
    wrong = f"not-the-password-{uuid.uuid4().hex}"
    config = node.config(username=user, password=wrong)
    with pytest.raises(CassandraUnavailableError) as caught:
        session_for(config)
    message = str(caught.value)
    assert f"authentication failed for user '{user}'" in message
    assert "STATESTORE_CASSANDRA_USERNAME / STATESTORE_CASSANDRA_PASSWORD" in message
    assert wrong not in repr(config)
    # The same through the CLI, configured by the environment only.
    for name, value in {
        "STATESTORE_CASSANDRA_PORT": str(node.port),
        "STATESTORE_CASSANDRA_USERNAME": user,
        "STATESTORE_CASSANDRA_PASSWORD": wrong,
        "STATESTORE_CASSANDRA_SSL": "true",
        "STATESTORE_CASSANDRA_SSL_CA": str(node.ca_pem),
    }.items():
        monkeypatch.setenv(name, value)
    assert cli_main(["get", "anystore", "anykey", "--keyspace", "anyks"]) == 5  # unavailable: refused login
    out, err = capfd.readouterr()
    assert f"statestore: authentication failed for user '{user}'" in err
    seen = "\n".join([_all_text(caught.value), caplog.text, out, err])
    assert wrong not in seen


def test_plaintext_to_the_tls_port_fails_clearly(node, app_role):
    user, password = app_role
    with pytest.raises(CassandraUnavailableError) as caught:
        session_for(node.config(username=user, password=password, ssl="false"))
    message = str(caught.value)
    assert "closed the connection during the handshake" in message
    assert "STATESTORE_CASSANDRA_SSL=true" in message and "--cassandra-ssl-ca" in message
    assert password not in _all_text(caught.value)


def test_a_certificate_the_client_does_not_trust_fails_clearly(node, app_role):
    user, password = app_role
    # No CA file: the node's self-signed certificate is checked against the system CAs.
    with pytest.raises(CassandraUnavailableError) as caught:
        session_for(node.config(username=user, password=password, ssl_ca_file=None))
    message = str(caught.value)
    assert "TLS with Cassandra at" in message and "failed" in message
    assert "CERTIFICATE_VERIFY_FAILED" in message and "--cassandra-ssl-ca" in message
    assert password not in _all_text(caught.value)


def test_user_password_and_tls_end_to_end_through_library_and_cli(node, app_role, caplog, capfd, monkeypatch):
    caplog.set_level(logging.DEBUG)
    user, password = app_role
    keyspace = f"sec_{uuid.uuid4().hex[:10]}"
    store = f"s{uuid.uuid4().hex[:12]}"
    config = node.config(username=user, password=password, keyspace=keyspace)
    assert config.ssl and config.ssl_check_hostname and config.ssl_ca_file == str(node.ca_pem)
    assert password not in repr(config)

    cluster = build_cluster(config)
    try:
        session = cluster.connect()
        create_keyspace(session, keyspace)
        spec = provision_store(session, StoreSpec(keyspace, store, StoreType.PARTITIONED_KV, 4))
        words = {"alpha": 3, "beta": 1, "gamma": 7}
        stats = apply_deltas(
            session, spec, 0, [Delta(encode_text(w), n, None) for w, n in words.items()], concurrency=8, write_ts=1
        )
        assert stats.written == 3
        apply_deltas(session, spec, 1, [Delta(encode_text("alpha"), 2, None)], concurrency=8, write_ts=2)
    finally:
        cluster.shutdown()

    env = {
        "STATESTORE_CASSANDRA_PORT": str(node.port),
        "STATESTORE_CASSANDRA_USERNAME": user,
        "STATESTORE_CASSANDRA_PASSWORD": password,
        "STATESTORE_CASSANDRA_SSL": "true",
        "STATESTORE_CASSANDRA_SSL_CA": str(node.ca_pem),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cli_config = cfg.resolve(CassandraConfig, overrides={"keyspace": keyspace})  # what the CLI resolves
    capfd.readouterr()
    try:
        results = {word: cli_main(["get", store, word, "--keyspace", keyspace]) for word in ("alpha", "gamma")}
        got, got_err = capfd.readouterr()
        missing = cli_main(["get", store, "delta", "--keyspace", keyspace])
        miss_out, miss_err = capfd.readouterr()
    finally:
        # The CLI's session is cached per config: close just that one (the node goes away).
        with contextlib.suppress(CassandraUnavailableError):
            session_for(cli_config).cluster.shutdown()
    assert results == {"alpha": 0, "gamma": 0}, got_err
    assert got.split() == ["5", "7"]
    assert missing == 3 and "'delta' is not in store" in miss_err  # not found

    assert password not in repr(cli_config) and password not in str(cli_config)
    seen = "\n".join([caplog.text, got, got_err, miss_out, miss_err, node.up_output])
    assert password not in seen
