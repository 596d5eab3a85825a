"""KafkaConfig: how to reach Kafka (bootstrap servers, TLS and SASL) and how the project's topics
and Spark's Kafka consumers are set up.

A frozen dataclass of settings (statestore.core.settings: defaults < STATESTORE_* environment <
flags). Its checks refuse security settings that do not fit together (SASL credentials without
SASL, certificates without TLS) and topics no write could be acknowledged on.
"""

from __future__ import annotations

from dataclasses import dataclass

from statestore.core.config.password_file import read_password_file
from statestore.core.errors import ConfigError
from statestore.core.settings import parse_bool, parse_non_negative_int, parse_positive_int, setting

KAFKA_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
KAFKA_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _isolation_level(raw: str) -> str:
    level = raw.strip().lower()
    if level not in ("read_committed", "read_uncommitted"):
        raise ValueError("use read_committed or read_uncommitted")
    return level


def _security_protocol(raw: str) -> str:
    protocol = raw.strip().upper()
    if protocol not in KAFKA_SECURITY_PROTOCOLS:
        raise ValueError(f"use one of {', '.join(KAFKA_SECURITY_PROTOCOLS)}")
    return protocol


def _sasl_mechanism(raw: str) -> str | None:
    mechanism = raw.strip().upper()
    if not mechanism:
        return None
    if mechanism not in KAFKA_SASL_MECHANISMS:
        raise ValueError(f"use one of {', '.join(KAFKA_SASL_MECHANISMS)}")
    return mechanism


def _blank_is_none(raw: str) -> str | None:
    """Empty: not given (the DAGs render an absent connection password as '', and clear a
    setting of the worker's environment so)."""
    return raw or None


@dataclass(frozen=True)
class KafkaConfig:
    """How to reach Kafka."""

    bootstrap_servers: str = setting(
        "127.0.0.1:9092",
        "STATESTORE_KAFKA_BOOTSTRAP",
        "--kafka-bootstrap",
        "Kafka bootstrap servers (default 127.0.0.1:9092)",
    )
    topic_replication: int = setting(
        1,
        "STATESTORE_KAFKA_TOPIC_REPLICATION",
        "--topic-replication",
        "replication factor of topics this project creates (default 1; 3 on a 3-broker cluster)",
        parse_positive_int,
    )
    min_insync_replicas: int | None = setting(
        None,
        "STATESTORE_KAFKA_MIN_INSYNC_REPLICAS",
        "--min-insync-replicas",
        "min.insync.replicas of topics this project creates (default: the broker's; 2 with replication 3)",
        parse_positive_int,
    )
    # Spark's Kafka reader asks for a partition's offset range right after each poll; the
    # broker answers that only after the consumer's prefetch, which at the end of a partition
    # waits fetch.max.wait.ms (Kafka's 500 ms) for data that Spark never asks for.
    fetch_max_wait_ms: int = setting(
        10,
        "STATESTORE_KAFKA_FETCH_MAX_WAIT_MS",
        "--kafka-fetch-max-wait-ms",
        "fetch.max.wait.ms of Spark's Kafka consumers (default 10; Kafka's own 500 adds half a second per "
        "task that reads to the end of a partition)",
        parse_non_negative_int,
    )
    # Spark's Kafka source reads read_uncommitted unless told: the records of a producer's
    # aborted transaction would be counted.
    isolation_level: str = setting(
        "read_committed",
        "STATESTORE_KAFKA_ISOLATION_LEVEL",
        "--kafka-isolation-level",
        "isolation.level of Spark's Kafka consumers: read_committed (default: records of aborted "
        "transactions are not counted) or read_uncommitted",
        _isolation_level,
    )
    # TLS and SASL of every Kafka client of the project: the CLI's producer and admin client
    # (confluent-kafka) and Spark's Kafka source (conn.kafka.client_security / spark_security).
    security_protocol: str = setting(
        "PLAINTEXT",
        "STATESTORE_KAFKA_SECURITY_PROTOCOL",
        "--kafka-security-protocol",
        "PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL",
        _security_protocol,
    )
    sasl_mechanism: str | None = setting(
        None,
        "STATESTORE_KAFKA_SASL_MECHANISM",
        "--kafka-sasl-mechanism",
        "with SASL_SSL or SASL_PLAINTEXT: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (required then)",
        _sasl_mechanism,
    )
    sasl_username: str | None = setting(
        None,
        "STATESTORE_KAFKA_USERNAME",
        "--kafka-username",
        "SASL user (with SASL_SSL or SASL_PLAINTEXT)",
        _blank_is_none,
    )
    sasl_password: str | None = setting(
        None,
        "STATESTORE_KAFKA_PASSWORD",
        "--kafka-password",
        "SASL password; on the command line other users see it in ps: prefer the environment variable or "
        "--kafka-password-file",
        _blank_is_none,
        secret=True,
    )
    # Read once, in __post_init__, into `sasl_password` (as CassandraConfig.password_file).
    sasl_password_file: str | None = setting(
        None,
        "STATESTORE_KAFKA_PASSWORD_FILE",
        "--kafka-password-file",
        "file whose content, a trailing newline stripped, is the SASL password; not together with "
        "--kafka-password / STATESTORE_KAFKA_PASSWORD",
        _blank_is_none,
    )
    kafka_ssl_ca_file: str | None = setting(
        None,
        "STATESTORE_KAFKA_SSL_CA",
        "--kafka-ssl-ca",
        "with SSL or SASL_SSL: PEM file of the CA(s) that signed the brokers' certificates (default: system CAs)",
        _blank_is_none,
    )
    kafka_ssl_cert_file: str | None = setting(
        None,
        "STATESTORE_KAFKA_SSL_CERT",
        "--kafka-ssl-cert",
        "with SSL or SASL_SSL: PEM client certificate, for brokers that require client authentication",
        _blank_is_none,
    )
    kafka_ssl_key_file: str | None = setting(
        None,
        "STATESTORE_KAFKA_SSL_KEY",
        "--kafka-ssl-key",
        "PEM key of the client certificate (unencrypted PKCS#8, BEGIN PRIVATE KEY)",
        _blank_is_none,
    )
    kafka_ssl_check_hostname: bool = setting(
        True,
        "STATESTORE_KAFKA_SSL_CHECK_HOSTNAME",
        "--kafka-ssl-check-hostname",
        "check that a broker's certificate names the host connected to (default true; 'false' to turn off)",
        parse_bool,
    )

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.security_protocol.endswith("SSL")

    def __post_init__(self) -> None:
        self._check_security()
        if self.min_insync_replicas is not None and self.min_insync_replicas > self.topic_replication:
            raise ConfigError(
                f"--min-insync-replicas {self.min_insync_replicas} exceeds --topic-replication "
                f"{self.topic_replication}: no write could ever be acknowledged; lower it or raise the replication"
            )

    def _check_security(self) -> None:
        self._read_password_file()
        self._check_sasl()
        self._check_tls()

    def _read_password_file(self) -> None:
        if self.sasl_password_file:
            if self.sasl_password is not None:
                raise ConfigError(
                    "give the Kafka password once: either in a file (--kafka-password-file / "
                    "STATESTORE_KAFKA_PASSWORD_FILE) or itself (STATESTORE_KAFKA_PASSWORD / --kafka-password), "
                    "not both"
                )
            object.__setattr__(
                self,
                "sasl_password",
                read_password_file(self.sasl_password_file, "--kafka-password-file / STATESTORE_KAFKA_PASSWORD_FILE"),
            )
        object.__setattr__(self, "sasl_password_file", None)

    def _check_sasl(self) -> None:
        """SASL needs a mechanism, a user and a password; without SASL, none of them may be given."""
        if self.sasl:
            missing = [
                flag
                for flag, value in (
                    ("--kafka-sasl-mechanism (STATESTORE_KAFKA_SASL_MECHANISM)", self.sasl_mechanism),
                    ("--kafka-username (STATESTORE_KAFKA_USERNAME)", self.sasl_username),
                    (
                        "a password (STATESTORE_KAFKA_PASSWORD or --kafka-password-file / "
                        "STATESTORE_KAFKA_PASSWORD_FILE)",
                        self.sasl_password,
                    ),
                )
                if value is None
            ]
            if missing:
                protocol = f"--kafka-security-protocol {self.security_protocol} (STATESTORE_KAFKA_SECURITY_PROTOCOL)"
                raise ConfigError(f"{protocol} needs {', '.join(missing)}")
            return
        sasl_given = [
            flag
            for flag, value in (
                ("--kafka-sasl-mechanism", self.sasl_mechanism),
                ("--kafka-username", self.sasl_username),
                ("--kafka-password", self.sasl_password),
            )
            if value is not None
        ]
        if sasl_given:
            raise ConfigError(
                f"{', '.join(sasl_given)} (or their STATESTORE_KAFKA_* variables) need SASL: set "
                "--kafka-security-protocol SASL_SSL (or SASL_PLAINTEXT); it is " + self.security_protocol
            )

    def _check_tls(self) -> None:
        """Certificates need TLS, and a client certificate comes with its key."""
        tls_given = [
            flag
            for flag, value in (
                ("--kafka-ssl-ca", self.kafka_ssl_ca_file),
                ("--kafka-ssl-cert", self.kafka_ssl_cert_file),
                ("--kafka-ssl-key", self.kafka_ssl_key_file),
            )
            if value is not None
        ]
        if tls_given and not self.tls:
            raise ConfigError(
                f"{', '.join(tls_given)} (or their STATESTORE_KAFKA_SSL_* variables) need TLS: set "
                "--kafka-security-protocol SASL_SSL (or SSL); it is " + self.security_protocol
            )
        if (self.kafka_ssl_cert_file is None) != (self.kafka_ssl_key_file is None):
            raise ConfigError(
                "a Kafka client certificate needs both --kafka-ssl-cert and --kafka-ssl-key "
                "(STATESTORE_KAFKA_SSL_CERT / STATESTORE_KAFKA_SSL_KEY)"
            )
