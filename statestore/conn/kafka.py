"""Kafka from Python (confluent-kafka): topics and producing text lines.

The stream itself reads Kafka through Spark's connector; this module is for the CLI, the
local set-up and the tests, and says what options Spark's Kafka source starts from
(spark_source_options). TLS and SASL (KafkaConfig's security settings) map to both:
client_security for confluent-kafka, spark_security for Spark's source.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from confluent_kafka import KafkaError as KafkaErrorCode
from confluent_kafka import KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType

from statestore.core.config import KafkaConfig
from statestore.core.durations import format_duration
from statestore.core.errors import ConfigError, KafkaError
from statestore.core.event_time import TimedValue, TimestampedLineError, format_instant, parse_timestamped_line
from statestore.core.names import validate_topic

_TIMEOUT_S = 15
# The local broker accepts messages up to 8 MiB (stack/kafka-server.properties).
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
_quiet = logging.getLogger("statestore.kafka")
_log = logging.getLogger(__name__)
_quiet.addHandler(logging.NullHandler())


_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def client_security(config: KafkaConfig) -> dict[str, str]:
    """The TLS and SASL settings of a confluent-kafka (librdkafka) client for `config`; none
    for PLAINTEXT. Files are passed by path; the password itself (sasl.password) only ever
    lives in the client's in-memory configuration."""
    if config.security_protocol == "PLAINTEXT":
        return {}
    settings = {"security.protocol": config.security_protocol}
    if config.sasl:
        settings["sasl.mechanisms"] = config.sasl_mechanism
        settings["sasl.username"] = config.sasl_username
        settings["sasl.password"] = config.sasl_password
    if config.tls:
        if config.kafka_ssl_ca_file:
            settings["ssl.ca.location"] = config.kafka_ssl_ca_file
        if config.kafka_ssl_cert_file:
            settings["ssl.certificate.location"] = config.kafka_ssl_cert_file
            settings["ssl.key.location"] = config.kafka_ssl_key_file
        settings["ssl.endpoint.identification.algorithm"] = "https" if config.kafka_ssl_check_hostname else "none"
    return settings


def _jaas_quoted(value: str) -> str:
    """`value` as a double-quoted JAAS option value (Kafka parses it with a StreamTokenizer)."""
    if any(c in value for c in "\r\n\0"):
        raise ConfigError("a Kafka SASL user or password must not contain line breaks or NUL characters")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def jaas_config(config: KafkaConfig) -> str:
    """sasl.jaas.config of a Java Kafka client for `config`'s SASL user: it carries the password,
    so it is built where it is used (the driver, in memory) and never put on a command line."""
    module = _PLAIN_LOGIN if config.sasl_mechanism == "PLAIN" else _SCRAM_LOGIN
    user, password = _jaas_quoted(config.sasl_username), _jaas_quoted(config.sasl_password)
    return f"{module} required username={user} password={password};"


def _pem(path: str, source: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise ConfigError(f"{source}: cannot read the PEM file {path}: {reason}") from None
    if "-----BEGIN " not in text:
        raise ConfigError(f"{source}: {path} is not a PEM file (no -----BEGIN line)")
    return text


def spark_security(config: KafkaConfig) -> dict[str, str]:
    """The TLS and SASL options of Spark's Kafka source for `config` (kafka.* options; none for
    PLAINTEXT). The PEM files are read here, on the driver, and passed as their content
    (ssl.truststore.certificates, ssl.keystore.certificate.chain / .key: PEM stores, Kafka
    clients 2.7 and later), so executors need no copy of them. sasl.jaas.config carries the
    password: Spark redacts it where it logs Kafka parameters (KafkaRedactionUtil)."""
    if config.security_protocol == "PLAINTEXT":
        return {}
    options = {"kafka.security.protocol": config.security_protocol}
    if config.sasl:
        options["kafka.sasl.mechanism"] = config.sasl_mechanism
        options["kafka.sasl.jaas.config"] = jaas_config(config)
    if config.tls:
        if config.kafka_ssl_ca_file:
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.certificates"] = _pem(
                config.kafka_ssl_ca_file, "--kafka-ssl-ca / STATESTORE_KAFKA_SSL_CA"
            )
        if config.kafka_ssl_cert_file:
            key_source = "--kafka-ssl-key / STATESTORE_KAFKA_SSL_KEY"
            key = _pem(config.kafka_ssl_key_file, key_source)
            if "-----BEGIN PRIVATE KEY-----" not in key:
                raise ConfigError(
                    f"{key_source}: {config.kafka_ssl_key_file} is not an unencrypted PKCS#8 key (BEGIN PRIVATE "
                    "KEY), the only form Spark's Kafka client reads without a key password; convert it with "
                    "`openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8`"
                )
            options["kafka.ssl.keystore.type"] = "PEM"
            options["kafka.ssl.keystore.certificate.chain"] = _pem(
                config.kafka_ssl_cert_file, "--kafka-ssl-cert / STATESTORE_KAFKA_SSL_CERT"
            )
            options["kafka.ssl.keystore.key"] = key
        # Java's name for "check the host name": https; empty turns the check off.
        options["kafka.ssl.endpoint.identification.algorithm"] = "https" if config.kafka_ssl_check_hostname else ""
    return options


def spark_source_options(config: KafkaConfig) -> dict[str, str]:
    """The options every Spark Kafka reader of the project starts from (stream and batch)."""
    return {
        "kafka.bootstrap.servers": config.bootstrap_servers,
        "kafka.fetch.max.wait.ms": str(config.fetch_max_wait_ms),
        # read_committed by default: records of aborted transactions are not input.
        "kafka.isolation.level": config.isolation_level,
        **spark_security(config),
    }


class _Problems:
    """What one client's librdkafka reported while it tried to connect (error_cb and its log):
    enough to tell a refused login or a failed TLS handshake from a broker that is down, and
    to fail at once on the first two instead of waiting out a timeout."""

    # A broker that closes the connection right after connecting, before it answers the first
    # request, does so to a plaintext client on a TLS listener; seen this often, it is no accident.
    _CLOSED_EARLY = 3

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.auth: str | None = None
        self.tls: str | None = None
        self.closed_early = 0
        self.last_closed: str | None = None
        self.logger = logging.Logger("statestore.kafka.client")
        self.logger.addHandler(_Forward(self))

    def settings(self) -> dict:
        # librdkafka logs every refused connection to stderr; route its log to Python logging.
        return {
            "bootstrap.servers": self.config.bootstrap_servers,
            "logger": self.logger,
            "error_cb": self.on_error,
            **client_security(self.config),
        }

    def on_error(self, err) -> None:
        if err.code() == KafkaErrorCode._AUTHENTICATION:
            self.auth = self.auth or err.str()
        elif err.code() == KafkaErrorCode._SSL:
            self.tls = self.tls or err.str()

    def on_log(self, message: str) -> None:
        if "connection closed by peer" in message and "APIVERSION_QUERY" in message:
            self.closed_early += 1
            self.last_closed = message.split("]: ", 1)[-1]

    def _hide(self, text: str) -> str:
        password = self.config.sasl_password
        return text.replace(password, "<hidden>") if password else text

    def refusal(self) -> KafkaError | None:
        """The error for a refused login or TLS failure seen so far, else None."""
        config, where = self.config, self.config.bootstrap_servers
        if self.auth is not None:
            return KafkaError(
                f"Kafka at {where} refused the SASL login of user {config.sasl_username!r} with "
                f"{config.sasl_mechanism} ({self._hide(self.auth)}): check STATESTORE_KAFKA_USERNAME and the "
                "password (STATESTORE_KAFKA_PASSWORD or --kafka-password-file / STATESTORE_KAFKA_PASSWORD_FILE), "
                "and --kafka-sasl-mechanism (STATESTORE_KAFKA_SASL_MECHANISM)"
            )
        if self.tls is not None:
            ca = config.kafka_ssl_ca_file or "the system CAs (no --kafka-ssl-ca given)"
            return KafkaError(
                f"TLS with Kafka at {where} failed ({self._hide(self.tls)}). The broker's certificate was checked "
                f"against {ca}: point --kafka-ssl-ca / STATESTORE_KAFKA_SSL_CA at the PEM of the CA that signed it "
                "(the local stack's is .stack/tls/ca.pem). A certificate for another host name needs that name in "
                "STATESTORE_KAFKA_BOOTSTRAP (or --kafka-ssl-check-hostname false)."
            )
        if not config.tls and self.closed_early >= self._CLOSED_EARLY:
            return KafkaError(
                f"Kafka at {where} closed the connection before answering ({self.last_closed}). A broker listener "
                f"that requires TLS does this to plaintext clients (--kafka-security-protocol is "
                f"{config.security_protocol}): set STATESTORE_KAFKA_SECURITY_PROTOCOL=SASL_SSL (or SSL) and point "
                "STATESTORE_KAFKA_SSL_CA (--kafka-ssl-ca) at the PEM of its CA (the local stack's: .stack/tls/ca.pem)."
            )
        return None

    def error(self, client, exc: Exception) -> KafkaError:
        """The clearest error for a failed call of `client`: refused login, TLS, else unreachable."""
        client.poll(0)  # serves error_cb
        return self.refusal() or _unreachable(self.config, exc)


class _Forward(logging.Handler):
    """Hands librdkafka's log lines to _Problems, then on to the quiet module logger."""

    def __init__(self, problems: _Problems) -> None:
        super().__init__()
        self.problems = problems

    def emit(self, record: logging.LogRecord) -> None:
        self.problems.on_log(record.getMessage())
        _quiet.handle(record)


def _admin(config: KafkaConfig) -> tuple[AdminClient, _Problems]:
    problems = _Problems(config)
    return AdminClient(problems.settings()), problems


def _metadata(client, problems: _Problems, topic: str | None = None):
    """Cluster metadata (of `topic` only, if given) within _TIMEOUT_S, asked for in short steps
    so that a refused login or a failed TLS handshake fails at once, not after the timeout."""
    deadline = time.monotonic() + _TIMEOUT_S
    while True:
        try:
            return client.list_topics(topic=topic, timeout=max(0.1, min(1.0, deadline - time.monotonic())))
        except KafkaException as exc:
            client.poll(0)  # serves error_cb
            refused = problems.refusal()
            if refused is not None:
                raise refused from None
            if time.monotonic() >= deadline:
                raise _unreachable(problems.config, exc) from None


def _unreachable(config: KafkaConfig, exc: Exception) -> KafkaError:
    return KafkaError(
        f"cannot reach Kafka at {config.bootstrap_servers} ({exc}). Is it running? For the local "
        "stack run `make stack-up`; otherwise set STATESTORE_KAFKA_BOOTSTRAP (and, for a broker with TLS "
        "or SASL, STATESTORE_KAFKA_SECURITY_PROTOCOL and the settings it needs)."
    )


def _partitions(metadata, topic: str) -> int | None:
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return None
    return len(found.partitions)


def partition_count(config: KafkaConfig, topic: str) -> int | None:
    """The topic's partition count, or None if it does not exist."""
    validate_topic(topic)
    admin, problems = _admin(config)
    return _partitions(_metadata(admin, problems, topic), topic)


class TopicIds:
    """Asks Kafka for topics' ids (a topic gets a new one each time it is created), through one
    admin client kept for every question (a driver asks once per batch).

    A broker lost under a running stream (the controller among them) leaves Kafka without an
    answer until the others elect a new one; Spark's own source waits that out, so the question
    is asked again on a transient error (timed out, retriable) for up to `patience_s` before the
    stream stops with KafkaError. A refused login or TLS handshake fails at once.

    Each new attempt goes through a new admin client, as Spark's source does: librdkafka's client
    keeps asking the controller its metadata last named, and when that broker is the one lost it
    can wait on it past any patience, while a new client learns the live ones from the bootstrap
    servers. `new_admin` makes a client from the settings of a _Problems (tests stand one in)."""

    def __init__(
        self,
        config: KafkaConfig,
        patience_s: float = 4 * _TIMEOUT_S,
        new_admin: Callable[[_Problems], object] | None = None,
    ) -> None:
        self.config = config
        self.patience_s = patience_s
        self._new_admin = new_admin or (lambda problems: AdminClient(problems.settings()))
        self._connect()

    def _connect(self) -> None:
        self._problems = _Problems(self.config)
        self._admin = self._new_admin(self._problems)

    def of(self, topic: str) -> str | None:
        """The topic's id, or None if the topic does not exist."""
        validate_topic(topic)
        deadline = time.monotonic() + self.patience_s
        while True:
            try:
                described = self._admin.describe_topics(TopicCollection([topic]), request_timeout=_TIMEOUT_S)
                return str(described[topic].result().topic_id)
            except KafkaException as exc:
                reported = exc.args[0] if exc.args and hasattr(exc.args[0], "code") else None
                if reported is not None and reported.code() == KafkaErrorCode.UNKNOWN_TOPIC_OR_PART:
                    return None
                error = self._problems.error(self._admin, exc)
                if self._problems.refusal() is not None or not _transient(reported) or time.monotonic() >= deadline:
                    raise error from None
                _log.warning("asking Kafka for topic %s's id: %s; asking again through a new client", topic, exc)
                time.sleep(1.0)
                self._connect()


# librdkafka's errors worth asking again although it does not mark them retriable (_transient).
_AGAIN = (KafkaErrorCode._TIMED_OUT, KafkaErrorCode.REQUEST_TIMED_OUT, KafkaErrorCode._TRANSPORT)


def _transient(reported: KafkaErrorCode | None) -> bool:
    """Whether librdkafka's error says the failed call may succeed if made again (a timeout, no
    leader or controller yet, the connection to the broker asked lost: that broker was killed
    mid-request, and librdkafka does not mark it retriable); an exception without one is not
    transient."""
    if reported is None:
        return False
    return reported.code() in _AGAIN or reported.retriable()


def end_offsets(config: KafkaConfig, topic: str) -> dict[int, int] | None:
    """Each partition's end offset (the next offset to be written) now, or None if the topic
    does not exist: one ListOffsets request for all partitions."""
    return end_offsets_of_topics(config, [topic]).get(topic)


def end_offsets_of_topics(config: KafkaConfig, topics: Iterable[str]) -> dict[str, dict[int, int]]:
    """`end_offsets` of each of `topics` with one client and one ListOffsets request (the
    metrics of a keyspace of hundreds of stores ask once, not once per store); a topic that does
    not exist is left out."""
    wanted = sorted({validate_topic(topic) for topic in topics})
    if not wanted:
        return {}
    admin, problems = _admin(config)
    metadata = _metadata(admin, problems, wanted[0] if len(wanted) == 1 else None)  # one: its own only
    asked = {
        TopicPartition(topic, p): OffsetSpec.latest()
        for topic in wanted
        for p in range(_partitions(metadata, topic) or 0)
    }
    if not asked:
        return {}
    ends: dict[str, dict[int, int]] = {}
    try:
        for tp, future in admin.list_offsets(asked, request_timeout=_TIMEOUT_S).items():
            ends.setdefault(tp.topic, {})[tp.partition] = future.result().offset
    except KafkaException as exc:
        raise problems.error(admin, exc) from None
    return ends


def end_offsets_source(config: KafkaConfig | None) -> Callable[[str], dict[int, int] | None] | None:
    """`end_offsets` of a topic with `config` (None: no Kafka to ask): what the stream status
    (statestore.store.book.status.stream_status) takes to work out the lag."""
    return None if config is None else partial(end_offsets, config)


def ensure_topic(config: KafkaConfig, topic: str, partitions: int) -> int:
    """Create `topic` with `partitions` unless it exists; return its partition count.

    New topics get the configured replication factor and min.insync.replicas (KafkaConfig).
    """
    validate_topic(topic)
    admin, problems = _admin(config)
    existing = _partitions(_metadata(admin, problems, topic), topic)
    if existing is not None:
        return existing
    # With replication 3 and min.insync.replicas 2, an acknowledged line survives one broker lost.
    insync = config.min_insync_replicas
    topic_config = {} if insync is None else {"min.insync.replicas": str(insync)}
    new_topic = NewTopic(
        topic, num_partitions=partitions, replication_factor=config.topic_replication, config=topic_config
    )
    future = admin.create_topics([new_topic])[topic]
    try:
        future.result(timeout=_TIMEOUT_S)
    except KafkaException as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            admin.poll(0)
            raise problems.refusal() or KafkaError(f"cannot create topic {topic!r}: {exc}") from None
    return _partitions(_metadata(admin, problems, topic), topic) or partitions


def produce(config: KafkaConfig, topic: str, values: Iterable[bytes | TimedValue | None]) -> int:
    """Send each value as one message (no key); return how many Kafka acknowledged. A
    TimedValue goes with its own timestamp (the record's event time), anything else with the
    producer's clock."""
    validate_topic(topic)
    problems = _Problems(config)
    producer = Producer(
        {
            **problems.settings(),
            "linger.ms": 20,
            "compression.type": "lz4",
            "message.max.bytes": MAX_MESSAGE_BYTES + 4096,
            "enable.idempotence": True,
        }
    )
    # Connected (and logged in) before the first message is queued: a refused login or a failed
    # TLS handshake fails here, with nothing sent.
    _metadata(producer, problems, topic)
    failures: list[str] = []
    sent = 0

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failures.append(str(err))

    for item in values:
        value, stamp = (item.value, item.timestamp_ms) if isinstance(item, TimedValue) else (item, 0)
        if value is not None and len(value) > MAX_MESSAGE_BYTES:
            raise KafkaError(
                f"message {sent + 1} is {len(value)} bytes, over the {MAX_MESSAGE_BYTES}-byte limit; "
                "split the line or raise message.max.bytes on the broker and here"
            )
        while True:
            try:
                # timestamp 0 asks librdkafka for the current time (CreateTime now).
                producer.produce(topic, value=value, timestamp=stamp, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.5)  # local queue full: let deliveries drain
        sent += 1
        producer.poll(0)
    deadline = time.monotonic() + 60
    remaining = producer.flush(1)
    while remaining and time.monotonic() < deadline and problems.refusal() is None:
        remaining = producer.flush(1)
    refused = problems.refusal()
    if refused is not None and (remaining or failures):
        raise refused
    if remaining or failures:
        raise KafkaError(
            f"{len(failures) + remaining} of {sent} messages to {topic!r} were not delivered"
            + (f": {failures[0]}" if failures else " (timed out)")
        )
    return sent


def lines_of(path: Path) -> Iterable[bytes]:
    """The lines of a file as raw bytes, line breaks removed: bytes that are not UTF-8 pass
    through unchanged (the stream dead-letters them, nothing is lost here)."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.endswith(b"\n"):
                line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
            yield line


def timed_lines_of(path: Path) -> Iterable[TimedValue]:
    """The lines of a --timestamped file, each with its own event time; TimestampedLineError
    names the first line that is not <epoch-millis><TAB><text>."""
    for number, line in enumerate(lines_of(path), start=1):
        yield parse_timestamped_line(number, line)


@dataclass(frozen=True)
class TimestampLimits:
    """How far from the broker's clock the CreateTime of a record may be for the broker to take
    it (Kafka 4: `message.timestamp.after.max.ms`, 1 h by default, and
    `message.timestamp.before.max.ms`, unlimited by default), as a topic's config says, or for a
    topic not created yet the broker's defaults that it will get. With LogAppendTime the broker
    stamps records itself and refuses none."""

    where: str  # "topic 'words'", or "the broker's defaults (topic 'words' does not exist yet)"
    after_ms: int
    after_name: str
    before_ms: int
    before_name: str
    log_append_time: bool = False

    def check(self, number: int, stamp_ms: int, now_ms: int) -> None:
        """TimestampedLineError if line `number`, of time `stamp_ms`, would be refused at `now_ms`
        (this machine's clock; the broker judges by its own)."""
        if self.log_append_time:
            return
        if stamp_ms - now_ms > self.after_ms:
            self._refuse(number, stamp_ms, stamp_ms - now_ms, "ahead of", self.after_ms, self.after_name)
        if now_ms - stamp_ms > self.before_ms:
            self._refuse(number, stamp_ms, now_ms - stamp_ms, "behind", self.before_ms, self.before_name)

    def _refuse(self, number: int, stamp_ms: int, off_ms: int, side: str, limit_ms: int, name: str):
        raise TimestampedLineError(
            f"line {number}: time {stamp_ms} ({format_instant(stamp_ms)}) is {_rounded(off_ms)} {side} this "
            f"machine's clock, past the limit of {self.where}: {limit_ms} ms ({format_duration(limit_ms)}) {side} "
            f"the broker's clock ({name}); nothing sent. Fix the line, or raise the topic's {name.removeprefix('log.')}"
        )


def _rounded(millis: int) -> str:
    """`millis` to the nearest second, as e.g. 1h59m58s."""
    seconds = round(millis / 1000)
    if seconds == 0:
        return f"{millis}ms"
    parts = ((seconds // 86400, "d"), (seconds // 3600 % 24, "h"), (seconds // 60 % 60, "m"), (seconds % 60, "s"))
    return "".join(f"{n}{unit}" for n, unit in parts if n)


_NEVER = 2**63 - 1  # Kafka's Long.MAX_VALUE: no limit


def timestamp_limits(config: KafkaConfig, topic: str) -> TimestampLimits:
    """The timestamp limits a record sent to `topic` now meets: the topic's own config, or the
    broker's defaults if the topic does not exist yet (the CLI creates it with them)."""
    validate_topic(topic)
    admin, problems = _admin(config)
    exists = _partitions(_metadata(admin, problems, topic), topic) is not None
    if exists:
        resource, prefix, where = ConfigResource(ResourceType.TOPIC, topic), "", f"topic {topic!r}"
    else:
        broker = _metadata(admin, problems).controller_id
        resource = ConfigResource(ResourceType.BROKER, str(broker))
        prefix, where = "log.", f"the broker's defaults (topic {topic!r} does not exist yet)"
    try:
        entries = admin.describe_configs([resource], request_timeout=_TIMEOUT_S)[resource].result(_TIMEOUT_S)
    except KafkaException as exc:
        admin.poll(0)
        raise problems.refusal() or KafkaError(f"cannot read the timestamp limits of {where}: {exc}") from None
    values = {name: entry.value for name, entry in entries.items()}

    def limit(side: str) -> tuple[int, str]:
        # Kafka before 3.6 had one limit for both sides, message.timestamp.difference.max.ms.
        for name in (f"{prefix}message.timestamp.{side}.max.ms", f"{prefix}message.timestamp.difference.max.ms"):
            if values.get(name) is not None:
                return int(values[name]), name
        return _NEVER, f"{prefix}message.timestamp.{side}.max.ms"

    after_ms, after_name = limit("after")
    before_ms, before_name = limit("before")
    log_append = values.get(f"{prefix}message.timestamp.type") == "LogAppendTime"
    return TimestampLimits(where, after_ms, after_name, before_ms, before_name, log_append)
