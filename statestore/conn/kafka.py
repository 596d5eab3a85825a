"""Kafka from Python (confluent-kafka): topics and producing text lines.

The stream itself reads Kafka through Spark's connector; this module is for the CLI, the
local set-up and the tests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaError as KafkaErrorCode
from confluent_kafka import KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType

from statestore.core.config import KafkaConfig
from statestore.core.errors import KafkaError
from statestore.core.event_time import (
    TimedValue,
    TimestampedLineError,
    format_duration,
    format_instant,
    parse_timestamped_line,
)
from statestore.core.names import validate_topic

_TIMEOUT_S = 15
# The local broker accepts messages up to 8 MiB (stack/kafka-server.properties).
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
_quiet = logging.getLogger("statestore.kafka")
_quiet.addHandler(logging.NullHandler())


def _client_config(config: KafkaConfig) -> dict:
    # librdkafka logs every refused connection to stderr; route its log to Python logging.
    return {"bootstrap.servers": config.bootstrap_servers, "logger": _quiet}


def spark_source_options(config: KafkaConfig) -> dict[str, str]:
    """The options every Spark Kafka reader of the project starts from (stream and batch)."""
    return {
        "kafka.bootstrap.servers": config.bootstrap_servers,
        "kafka.fetch.max.wait.ms": str(config.fetch_max_wait_ms),
        # read_committed by default: records of aborted transactions are not input.
        "kafka.isolation.level": config.isolation_level,
    }


def _unreachable(config: KafkaConfig, exc: Exception) -> KafkaError:
    return KafkaError(
        f"cannot reach Kafka at {config.bootstrap_servers} ({exc}). Is it running? For the local "
        "stack run `scripts/stack up`; otherwise set STATESTORE_KAFKA_BOOTSTRAP."
    )


def partition_count(config: KafkaConfig, topic: str) -> int | None:
    """The topic's partition count, or None if it does not exist."""
    validate_topic(topic)
    admin = AdminClient(_client_config(config))
    try:
        metadata = admin.list_topics(topic=topic, timeout=_TIMEOUT_S)
    except KafkaException as exc:
        raise _unreachable(config, exc) from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return None
    return len(found.partitions)


class TopicIds:
    """Asks Kafka for topics' ids (a topic gets a new one each time it is created), through one
    admin client kept for every question (a driver asks once per batch)."""

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self._admin = AdminClient(_client_config(config))

    def of(self, topic: str) -> str | None:
        """The topic's id, or None if the topic does not exist."""
        validate_topic(topic)
        try:
            found = self._admin.describe_topics(TopicCollection([topic]), request_timeout=_TIMEOUT_S)[topic].result()
        except KafkaException as exc:
            if exc.args and getattr(exc.args[0], "code", lambda: None)() == KafkaErrorCode.UNKNOWN_TOPIC_OR_PART:
                return None
            raise _unreachable(self.config, exc) from None
        return str(found.topic_id)


def end_offsets(config: KafkaConfig, topic: str) -> dict[int, int] | None:
    """Each partition's end offset (the next offset to be written) now, or None if the topic
    does not exist: one ListOffsets request for all partitions."""
    count = partition_count(config, topic)
    if count is None:
        return None
    admin = AdminClient(_client_config(config))
    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(count)}
    try:
        futures = admin.list_offsets(asked, request_timeout=_TIMEOUT_S)
        return {tp.partition: future.result().offset for tp, future in futures.items()}
    except KafkaException as exc:
        raise _unreachable(config, exc) from None


def ensure_topic(config: KafkaConfig, topic: str, partitions: int) -> int:
    """Create `topic` with `partitions` unless it exists; return its partition count.

    New topics get the configured replication factor and min.insync.replicas (KafkaConfig).
    """
    existing = partition_count(config, topic)
    if existing is not None:
        return existing
    admin = AdminClient(_client_config(config))
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
            raise KafkaError(f"cannot create topic {topic!r}: {exc}") from None
    return partition_count(config, topic) or partitions


def produce(config: KafkaConfig, topic: str, values: Iterable[bytes | TimedValue | None]) -> int:
    """Send each value as one message (no key); return how many Kafka acknowledged. A
    TimedValue goes with its own timestamp (the record's event time), anything else with the
    producer's clock."""
    validate_topic(topic)
    producer = Producer(
        {
            **_client_config(config),
            "linger.ms": 20,
            "compression.type": "lz4",
            "message.max.bytes": MAX_MESSAGE_BYTES + 4096,
            "enable.idempotence": True,
        }
    )
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
    remaining = producer.flush(60)
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
    admin = AdminClient(_client_config(config))
    exists = partition_count(config, topic) is not None
    if exists:
        resource, prefix, where = ConfigResource(ResourceType.TOPIC, topic), "", f"topic {topic!r}"
    else:
        try:
            broker = admin.list_topics(timeout=_TIMEOUT_S).controller_id
        except KafkaException as exc:
            raise _unreachable(config, exc) from None
        resource = ConfigResource(ResourceType.BROKER, str(broker))
        prefix, where = "log.", f"the broker's defaults (topic {topic!r} does not exist yet)"
    try:
        entries = admin.describe_configs([resource], request_timeout=_TIMEOUT_S)[resource].result(_TIMEOUT_S)
    except KafkaException as exc:
        raise KafkaError(f"cannot read the timestamp limits of {where}: {exc}") from None
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
