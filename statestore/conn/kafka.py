"""Kafka from Python (confluent-kafka): topics and producing text lines.

The stream itself reads Kafka through Spark's connector; this module is for the CLI, the
local set-up and the tests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from statestore.core.config import KafkaConfig
from statestore.core.errors import KafkaError
from statestore.core.event_time import TimedValue, parse_timestamped_line
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
