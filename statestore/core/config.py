"""Configuration sections: how to reach Cassandra and Kafka, and what a stream job runs.

Each is a frozen dataclass of settings (statestore.core.settings: defaults < STATESTORE_*
environment < flags). The resolving functions are re-exported here, so callers keep one
import: `from statestore.core import config as cfg; cfg.resolve(CassandraConfig)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from statestore.core.errors import ConfigError, OptionError
from statestore.core.event_time import parse_duration
from statestore.core.model import StoreType
from statestore.core.names import validate_keyspace, validate_store_name, validate_topic
from statestore.core.options import compaction_class
from statestore.core.settings import (
    add_arguments,
    from_args,
    parse_bool,
    parse_hosts,
    parse_non_negative_int,
    parse_port,
    parse_positive_float,
    parse_positive_int,
    resolve,
    setting,
    to_environment,
)
from statestore.core.windows import SessionSpec, WindowSpec

__all__ = [
    "CONSISTENCY_LEVELS",
    "CassandraConfig",
    "KafkaConfig",
    "StreamConfig",
    "add_arguments",
    "from_args",
    "parse_trigger",
    "resolve",
    "setting",
    "to_environment",
    "trigger_seconds",
]

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


def _serial_consistency(raw: str) -> str:
    level = raw.strip().upper()
    if level not in ("AUTO", "SERIAL", "LOCAL_SERIAL"):
        raise ValueError("use AUTO, SERIAL or LOCAL_SERIAL")
    return level


def read_password_file(path: str, source: str) -> str:
    """The password a file holds: its content, a trailing newline stripped. `source` names the
    setting that gave the file, for the error (unreadable, not UTF-8, empty)."""
    try:
        with open(path, encoding="utf-8") as f:
            password = f.read().rstrip("\r\n")
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the password file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: the password file {path} is not UTF-8 text") from None
    if not password:
        raise ConfigError(f"{source}: the password file {path} is empty")
    return password


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
        "LOCAL_QUORUM",
        "STATESTORE_DML_CONSISTENCY",
        "--dml-consistency",
        "consistency of reads and writes of entries (default LOCAL_QUORUM; ONE, LOCAL_ONE, TWO and THREE "
        "are refused without --allow-weak-consistency)",
        _consistency,
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
        "LOCAL_QUORUM",
        "STATESTORE_BOOKKEEPING_CONSISTENCY",
        "--bookkeeping-consistency",
        "consistency of the stream's registry progress and lease writes (default LOCAL_QUORUM: "
        "one of three replicas may be down)",
        _consistency,
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
                "LOCAL_QUORUM (the default), QUORUM or ALL, or pass --allow-weak-consistency "
                "(STATESTORE_ALLOW_WEAK_CONSISTENCY=true) to accept lost updates"
            )


# How far a record's event time may be ahead of its batch's clock (StreamConfig.max_future_ms).
DEFAULT_MAX_FUTURE_MS = 300_000


def _isolation_level(raw: str) -> str:
    level = raw.strip().lower()
    if level not in ("read_committed", "read_uncommitted"):
        raise ValueError("use read_committed or read_uncommitted")
    return level


KAFKA_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
KAFKA_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


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
        protocol = f"--kafka-security-protocol {self.security_protocol} (STATESTORE_KAFKA_SECURITY_PROTOCOL)"
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
        sasl_given = [
            flag
            for flag, value in (
                ("--kafka-sasl-mechanism", self.sasl_mechanism),
                ("--kafka-username", self.sasl_username),
                ("--kafka-password", self.sasl_password),
            )
            if value is not None
        ]
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
                raise ConfigError(f"{protocol} needs {', '.join(missing)}")
        elif sasl_given:
            raise ConfigError(
                f"{', '.join(sasl_given)} (or their STATESTORE_KAFKA_* variables) need SASL: set "
                "--kafka-security-protocol SASL_SSL (or SASL_PLAINTEXT); it is " + self.security_protocol
            )
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


_DURATION = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_trigger(raw: str) -> str:
    """'available-now', or a processing-time interval such as '10s', '500ms', '1m'."""
    text = raw.strip().lower()
    if text == "available-now":
        return text
    for unit in ("ms", "s", "m", "h"):
        number = text[: -len(unit)]
        if text.endswith(unit) and number.replace(".", "", 1).isdigit() and float(number) > 0:
            return text
    raise ValueError("use 'available-now' or an interval like '10s', '500ms', '1m'")


def trigger_seconds(trigger: str) -> float:
    """The interval of a processing-time trigger, in seconds."""
    for unit in ("ms", "s", "m", "h"):
        if trigger.endswith(unit) and trigger[: -len(unit)].replace(".", "", 1).isdigit():
            return float(trigger[: -len(unit)]) * _DURATION[unit]
    raise ValueError(f"{trigger!r} is not a processing-time interval")


def _store_type(raw: str) -> str:
    return StoreType.parse(raw).value


def _duration(what: str, zero: bool = False):
    return lambda raw: parse_duration(raw, what, zero)


def _starting_offsets(raw: str) -> str:
    if raw not in ("earliest", "latest"):
        raise ValueError("use earliest or latest")
    return raw


def _checkpoint(raw: str) -> str:
    if not raw.strip():
        raise ValueError("give a directory or URI")
    return raw.strip()


@dataclass(frozen=True)
class StreamConfig:
    """The word-count stream: where it reads, which store it writes, how it triggers."""

    topic: str = setting(None, "STATESTORE_TOPIC", "--topic", "Kafka topic of text lines (required)", validate_topic)
    store: str = setting(
        None, "STATESTORE_STORE", "--store", "store to write the counts to (required)", validate_store_name
    )
    checkpoint: str = setting(
        None,
        "STATESTORE_CHECKPOINT",
        "--checkpoint",
        "Spark checkpoint location (offsets only; required)",
        _checkpoint,
    )
    store_type: str | None = setting(
        None,
        "STATESTORE_STORE_TYPE",
        "--store-type",
        "partitioned-kv, global-kv, their -versioned kinds or partitioned-window (default: the existing "
        "store's type, else partitioned-window with --window, else partitioned-kv)",
        _store_type,
    )
    window: int | None = setting(
        None,
        "STATESTORE_WINDOW",
        "--window",
        "count per time window of this size by Kafka record time, e.g. 1m (tumbling; a window store)",
        _duration("window"),
    )
    hop: int | None = setting(
        None,
        "STATESTORE_HOP",
        "--hop",
        "with --window: windows start every HOP (hopping windows; default: the window size, tumbling)",
        _duration("hop"),
    )
    session_gap: int | None = setting(
        None,
        "STATESTORE_SESSION_GAP",
        "--session-gap",
        "count per session of each word: its records no further apart than this, e.g. 5m (a session store)",
        _duration("session gap"),
    )
    grace: int | None = setting(
        None,
        "STATESTORE_GRACE",
        "--grace",
        "with --window or --session-gap: how long a window still takes late records after its end (sessions: "
        "how much older than the stream time a record may be) (default 0s)",
        _duration("grace", zero=True),
    )
    retention: int | None = setting(
        None,
        "STATESTORE_RETENTION",
        "--retention",
        "with --window or --session-gap: how long windows (sessions) are kept by stream time "
        "(default: the larger of window (gap) + grace and 1d)",
        _duration("retention"),
    )
    partitions: int | None = setting(
        None,
        "STATESTORE_PARTITIONS",
        "--partitions",
        "store partitions of a new store (default: the topic's partition count)",
        parse_positive_int,
    )
    compaction: str | None = setting(
        None,
        "STATESTORE_COMPACTION",
        "--compaction",
        "compaction strategy of a store this job creates: ucs, lcs, stcs, twcs or a class name such as "
        "UnifiedCompactionStrategy (default: the store type's, UCS for key-value stores; an existing "
        "store keeps its own)",
        compaction_class,
    )
    trigger: str = setting(
        "available-now",
        "STATESTORE_TRIGGER",
        "--trigger",
        "'available-now' (process what is there, then stop) or an interval such as '10s'",
        parse_trigger,
    )
    starting_offsets: str = setting(
        "earliest",
        "STATESTORE_STARTING_OFFSETS",
        "--starting-offsets",
        "where a new checkpoint starts reading: earliest or latest (default earliest)",
        _starting_offsets,
    )
    max_offsets_per_trigger: int | None = setting(
        None,
        "STATESTORE_MAX_OFFSETS_PER_TRIGGER",
        "--max-offsets-per-trigger",
        "cap on Kafka records per micro-batch (default: no cap)",
        parse_positive_int,
    )
    recover_from_store: bool = setting(
        False,
        "STATESTORE_RECOVER_FROM_STORE",
        "--recover-from-store",
        "with a new (empty) checkpoint, finish the store's last batch and continue from where it "
        "ended instead of refusing to start",
        parse_bool,
        switch=True,
    )
    apply_cache: bool = setting(
        True,
        "STATESTORE_APPLY_CACHE",
        "--apply-cache",
        "keep each batch's writes on the executors so the next batch reads only what they cannot vouch "
        "for (default on; --no-apply-cache reads every key from Cassandra, as before 2026-11)",
        parse_bool,
        switch=True,
    )
    driver_apply_records: int = setting(
        1000,
        "STATESTORE_DRIVER_APPLY_RECORDS",
        "--driver-apply-records",
        "a micro-batch of at most this many Kafka records is applied by the driver, with no Python tasks "
        "(default 1000; 0: every batch on the executors)",
        parse_non_negative_int,
    )
    max_future_ms: int = setting(
        DEFAULT_MAX_FUTURE_MS,
        "STATESTORE_MAX_FUTURE_MS",
        "--max-future",
        "how far a record's event time may be ahead of the batch's clock (its write time), e.g. 5m; a record "
        "further ahead is a dead letter with reason future, counted nowhere, and moves no stream time "
        "(default 5m)",
        _duration("max future"),
    )
    lease_ttl_s: float = setting(
        30.0,
        "STATESTORE_LEASE_TTL",
        "--lease-ttl",
        "seconds the store's writer lease outlives its holder (default 30); renewed every third",
        parse_positive_float,
    )
    dead_letter_retention_ms: int = setting(
        30 * 86_400_000,
        "STATESTORE_DEAD_LETTER_RETENTION",
        "--dead-letter-retention",
        "how long a dead letter is kept (the dead-letter table's TTL, set at every start), e.g. 30d; 0: "
        "forever (default 30d)",
        _duration("dead-letter retention", zero=True),
    )

    def __post_init__(self) -> None:
        for name in ("topic", "store", "checkpoint"):
            if getattr(self, name) is None:
                raise ConfigError(f"{name} is required: pass --{name} or set STATESTORE_{name.upper()}")
        validate_topic(self.topic)
        validate_store_name(self.store)
        if self.compaction is not None:
            try:
                object.__setattr__(self, "compaction", compaction_class(self.compaction))
            except OptionError as exc:
                raise ConfigError(f"--compaction: {exc}") from None
            timed = self.window is not None or self.session_gap is not None
            if self.compaction == "TimeWindowCompactionStrategy" and not timed:
                raise ConfigError(
                    "--compaction twcs is for window and session stores (--window or --session-gap): a "
                    "key-value store overwrites its entries rather than ageing them out; use ucs, lcs or stcs"
                )
        if self.window is not None and self.session_gap is not None:
            raise ConfigError("give either --window or --session-gap: a store counts in windows or in sessions")
        if self.window is None and self.hop is not None:
            raise ConfigError("--hop only apply to windows: pass --window too (e.g. --window 1m)")
        if self.window is None and self.session_gap is None:
            given = [f"--{name}" for name in ("grace", "retention") if getattr(self, name) is not None]
            if given:
                raise ConfigError(
                    f"{', '.join(given)} only apply to windows: pass --window (e.g. --window 1m) or --session-gap"
                )
        kind = None if self.store_type is None else StoreType(self.store_type)
        kinds = (
            ("--window", self.window, StoreType.PARTITIONED_WINDOW),
            ("--session-gap", self.session_gap, StoreType.PARTITIONED_SESSION),
        )
        for flag, given, wanted in kinds:
            if given is not None and kind is not None and kind is not wanted:
                raise ConfigError(
                    f"{flag} counts into a {wanted} store, not a {kind} store: "
                    f"leave out --store-type or pass --store-type {wanted}"
                )
        for flag, given, wanted in kinds:
            if kind is wanted and given is None:
                raise ConfigError(f"a {kind} store counts in windows: pass {flag} (e.g. {flag} 1m)")
        try:
            self.windowing  # noqa: B018 - checks the combination (hop <= window, retention >= window + grace)
        except OptionError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def windowing(self) -> WindowSpec | SessionSpec | None:
        """The windows or sessions to count in (None: a key-value count)."""
        if self.session_gap is not None:
            return SessionSpec(self.session_gap, self.grace or 0, self.retention)
        if self.window is None:
            return None
        return WindowSpec(self.window, self.hop, self.grace or 0, self.retention)
