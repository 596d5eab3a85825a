"""CassandraConfig: how to reach Cassandra and how to talk to it (hosts, authentication, TLS,
consistency levels, timeouts and the retry budget).

A frozen dataclass of settings (statestore.core.settings: defaults < STATESTORE_* environment <
flags). Its checks refuse a combination that would lose data unless forced: a DML consistency
whose reads need not see the last write. Whether a level is safe for a keyspace's data centers
is known only once connected: statestore.conn.cassandra.check_writer_scope.
"""

from __future__ import annotations

from dataclasses import dataclass

from statestore.core.config.password_file import read_password_file
from statestore.core.errors import ConfigError
from statestore.core.names import validate_keyspace
from statestore.core.settings import (
    parse_bool,
    parse_hosts,
    parse_port,
    parse_positive_float,
    parse_positive_int,
    setting,
)

CONSISTENCY_LEVELS = (
    "ONE",
    "TWO",
    "THREE",
    "QUORUM",
    "ALL",
    "LOCAL_QUORUM",
    "EACH_QUORUM",
    "LOCAL_ONE",
)


# Levels whose read replicas and write replicas need not overlap (ONE + ONE from replication
# factor 2 on, TWO + TWO from 4, THREE + THREE from 6): refused for entries unless forced
# (CassandraConfig.allow_weak_consistency).
WEAK_DML_CONSISTENCY_LEVELS = ("ONE", "LOCAL_ONE", "TWO", "THREE")


def _consistency(raw: str) -> str:
    level = raw.strip().upper()
    if level not in CONSISTENCY_LEVELS:
        raise ValueError(f"use one of {', '.join(CONSISTENCY_LEVELS)}")
    return level


def _writer_consistency(raw: str) -> str:
    """A level of entries or bookkeeping: one of CONSISTENCY_LEVELS, or AUTO (QUORUM: see
    statestore.conn.cassandra, which resolves it and refuses a LOCAL_ level on a keyspace in
    several data centers)."""
    level = raw.strip().upper()
    if level != "AUTO" and level not in CONSISTENCY_LEVELS:
        raise ValueError(f"use one of {', '.join(CONSISTENCY_LEVELS)}, or AUTO")
    return level


def _serial_consistency(raw: str) -> str:
    level = raw.strip().upper()
    if level not in ("AUTO", "SERIAL", "LOCAL_SERIAL"):
        raise ValueError("use AUTO, SERIAL or LOCAL_SERIAL")
    return level


@dataclass(frozen=True)
class CassandraConfig:
    """How to reach Cassandra and how to talk to it."""

    hosts: tuple[str, ...] = setting(
        ("127.0.0.1",),
        "STATESTORE_CASSANDRA_HOSTS",
        "--cassandra-hosts",
        "comma-separated contact points (default 127.0.0.1)",
        parse_hosts,
    )
    port: int = setting(9042, "STATESTORE_CASSANDRA_PORT", "--cassandra-port", "CQL port (default 9042)", parse_port)
    keyspace: str = setting(
        "wordcount",
        "STATESTORE_KEYSPACE",
        "--keyspace",
        "keyspace holding the stores (default wordcount)",
        validate_keyspace,
    )
    username: str | None = setting(
        None,
        "STATESTORE_CASSANDRA_USERNAME",
        "--cassandra-username",
        "user for PasswordAuthenticator (default: no authentication)",
    )
    password: str | None = setting(
        None,
        "STATESTORE_CASSANDRA_PASSWORD",
        "--cassandra-password",
        "password for PasswordAuthenticator; on the command line other users see it in ps: prefer the "
        "environment variable or --cassandra-password-file",
        secret=True,
    )
    # Read once, in __post_init__, into `password`: the config then holds the password as if it came
    # from STATESTORE_CASSANDRA_PASSWORD (to_environment hands that to child processes).
    password_file: str | None = setting(
        None,
        "STATESTORE_CASSANDRA_PASSWORD_FILE",
        "--cassandra-password-file",
        "file whose content, a trailing newline stripped, is the password (e.g. a mounted secret); not "
        "together with --cassandra-password / STATESTORE_CASSANDRA_PASSWORD",
    )
    local_dc: str = setting(
        "datacenter1",
        "STATESTORE_CASSANDRA_LOCAL_DC",
        "--cassandra-local-dc",
        "data center the driver routes to (default datacenter1)",
    )
    dml_consistency: str = setting(
        "AUTO",
        "STATESTORE_DML_CONSISTENCY",
        "--dml-consistency",
        "consistency of reads and writes of entries (default AUTO: QUORUM, which on a keyspace in one data "
        "center takes the same replicas as LOCAL_QUORUM; ONE, LOCAL_ONE, TWO and THREE are refused without "
        "--allow-weak-consistency; a writer refuses LOCAL_QUORUM and LOCAL_ONE on a keyspace that spans "
        "several data centers)",
        _writer_consistency,
    )
    allow_weak_consistency: bool = setting(
        False,
        "STATESTORE_ALLOW_WEAK_CONSISTENCY",
        "--allow-weak-consistency",
        "accept a --dml-consistency whose reads may miss the last write (ONE, LOCAL_ONE, TWO, THREE): "
        "the counts then lose updates whenever they do",
        parse_bool,
        switch=True,
    )
    ddl_consistency: str = setting(
        "ALL",
        "STATESTORE_DDL_CONSISTENCY",
        "--ddl-consistency",
        "consistency of schema steps and admin changes, never on the streaming path (default ALL)",
        _consistency,
    )
    bookkeeping_consistency: str = setting(
        "AUTO",
        "STATESTORE_BOOKKEEPING_CONSISTENCY",
        "--bookkeeping-consistency",
        "consistency of the stream's registry progress and lease writes (default AUTO: QUORUM, so one "
        "of three replicas may be down; a writer refuses LOCAL_QUORUM and LOCAL_ONE on a keyspace that "
        "spans several data centers)",
        _writer_consistency,
    )
    serial_consistency: str = setting(
        "AUTO",
        "STATESTORE_SERIAL_CONSISTENCY",
        "--serial-consistency",
        "consistency of lightweight transactions and of the reads a writer decides on (lease, "
        "registry epoch and progress; default AUTO: SERIAL, which costs what LOCAL_SERIAL does on a "
        "keyspace in one data center; LOCAL_SERIAL is refused on a keyspace that spans several)",
        _serial_consistency,
    )
    protocol_version: int = setting(
        5,
        "STATESTORE_CASSANDRA_PROTOCOL_VERSION",
        "--cassandra-protocol-version",
        "native protocol version (default 5: Cassandra 4.0 and later)",
        parse_positive_int,
    )
    request_timeout_s: float = setting(
        12.0,
        "STATESTORE_REQUEST_TIMEOUT",
        "--request-timeout",
        "seconds before one request times out (default 12)",
        parse_positive_float,
    )
    write_concurrency: int = setting(
        64,
        "STATESTORE_WRITE_CONCURRENCY",
        "--write-concurrency",
        "requests in flight per writer task (default 64)",
        parse_positive_int,
    )
    retry_budget_s: float = setting(
        60.0,
        "STATESTORE_RETRY_BUDGET",
        "--retry-budget",
        "seconds a batch keeps retrying while Cassandra is unreachable, with backoff, before "
        "the job fails (default 60)",
        parse_positive_float,
    )
    ssl: bool = setting(
        False, "STATESTORE_CASSANDRA_SSL", "--cassandra-ssl", "connect with TLS", parse_bool, switch=True
    )
    ssl_ca_file: str | None = setting(
        None,
        "STATESTORE_CASSANDRA_SSL_CA",
        "--cassandra-ssl-ca",
        "PEM file of the CA that signed Cassandra's certificate (default: system CAs)",
    )
    ssl_cert_file: str | None = setting(
        None,
        "STATESTORE_CASSANDRA_SSL_CERT",
        "--cassandra-ssl-cert",
        "PEM client certificate, for servers that require client authentication",
    )
    ssl_key_file: str | None = setting(
        None, "STATESTORE_CASSANDRA_SSL_KEY", "--cassandra-ssl-key", "PEM key of the client certificate"
    )
    ssl_check_hostname: bool = setting(
        True,
        "STATESTORE_CASSANDRA_SSL_CHECK_HOSTNAME",
        "--cassandra-ssl-check-hostname",
        "check that the certificate names the host (default true; 'false' to turn off)",
        parse_bool,
    )

    def __post_init__(self) -> None:
        if self.password_file:  # empty: none (the DAGs set it so, lest a worker's own file clash)
            if self.password is not None:
                raise ConfigError(
                    "give the Cassandra password once: either in a file (--cassandra-password-file / "
                    "STATESTORE_CASSANDRA_PASSWORD_FILE) or itself (STATESTORE_CASSANDRA_PASSWORD / "
                    "--cassandra-password), not both"
                )
            object.__setattr__(
                self,
                "password",
                read_password_file(
                    self.password_file, "--cassandra-password-file / STATESTORE_CASSANDRA_PASSWORD_FILE"
                ),
            )
        object.__setattr__(self, "password_file", None)
        if self.dml_consistency in WEAK_DML_CONSISTENCY_LEVELS and not self.allow_weak_consistency:
            raise ConfigError(
                f"--dml-consistency {self.dml_consistency} (STATESTORE_DML_CONSISTENCY) is refused: the stream "
                "reads each key's current count and writes old + delta, batch after batch, and at this level a "
                "read may reach replicas the last write did not, so the counts silently lose updates. Use "
                "AUTO (the default: QUORUM), QUORUM, LOCAL_QUORUM (a keyspace in one data center) or ALL, or pass "
                "--allow-weak-consistency "
                "(STATESTORE_ALLOW_WEAK_CONSISTENCY=true) to accept lost updates"
            )
