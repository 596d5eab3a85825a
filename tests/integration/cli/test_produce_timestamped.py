"""`statestore produce --timestamped` against the real Kafka: each line's time becomes its
record's timestamp, and a bad line is named before anything is sent."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer

from statestore.cli.main import main
from statestore.conn import kafka as kafka_io
from tests.integration.conftest import delete_topic


def _consume(kafka_config, topic: str, expected: int) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_config.bootstrap_servers,
            "group.id": f"t-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    records = []
    try:
        for _ in range(120):
            for message in consumer.consume(100, timeout=1.0):
                assert message.error() is None, message.error()
                kind, stamp = message.timestamp()
                assert kind == TIMESTAMP_CREATE_TIME
                records.append((stamp, message.value()))
            if len(records) >= expected:
                break
    finally:
        consumer.close()
    return records


def test_each_line_goes_with_its_own_time(capsys, tmp_path, kafka_config):
    lines = [(1_764_000_000_000, b"the cat"), (5, b"early \xff bytes"), (1_764_000_060_500, b"a\ttab inside")]
    source = tmp_path / "timed.txt"
    source.write_bytes(b"".join(b"%d\t%s\n" % (ms, text) for ms, text in lines))
    topic = f"ts-{uuid.uuid4().hex[:8]}"
    try:
        assert main(["produce", topic, str(source), "--partitions", "1", "--timestamped"]) == 0
        assert "produced 3 message(s)" in capsys.readouterr().err
        assert _consume(kafka_config, topic, 3) == lines
    finally:
        delete_topic(kafka_config, topic)


def test_a_bad_line_is_named_and_nothing_is_sent(capsys, tmp_path, kafka_config):
    source = tmp_path / "timed.txt"
    source.write_bytes(b"1000\tfine\n2000\talso fine\nyesterday\tnot a time\n3000\tnever sent\n")
    topic = f"ts-{uuid.uuid4().hex[:8]}"
    assert main(["produce", topic, str(source), "--timestamped"]) == 2
    err = capsys.readouterr().err
    assert "line 3: 'yesterday' is not a time in epoch milliseconds" in err
    # Refused before any side effect: the topic was not even created.
    assert kafka_io.partition_count(kafka_config, topic) is None


def _timed_file(path, stamps: list[int]):
    path.write_bytes(b"".join(b"%d\tword %d\n" % (ms, i) for i, ms in enumerate(stamps)))
    return path


def _create_topic(kafka_config, topic: str, **config: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_config.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1, config=config)])[topic].result(30)


def test_a_line_further_ahead_than_the_broker_accepts_sends_nothing(capsys, tmp_path, kafka_config):
    # Kafka 4 refuses a record more than message.timestamp.after.max.ms (1 h by default) ahead
    # of the broker's clock: the file must not be half delivered.
    now = int(time.time() * 1000)
    ahead = now + 2 * 3_600_000
    source = _timed_file(tmp_path / "timed.txt", [now - 60_000 + i // 1000 for i in range(50_000)] + [ahead])
    topic = f"ts-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka_config, topic)
    try:
        assert main(["produce", topic, str(source), "--timestamped"]) == 2
        assert kafka_io.end_offsets(kafka_config, topic) == {0: 0, 1: 0}
        err = capsys.readouterr().err
        assert f"line 50001: time {ahead}" in err
        assert "message.timestamp.after.max.ms" in err and "3600000" in err
        assert "nothing sent" in err
    finally:
        delete_topic(kafka_config, topic)


def test_a_missing_topic_is_checked_against_the_brokers_defaults(capsys, tmp_path, kafka_config):
    now = int(time.time() * 1000)
    source = _timed_file(tmp_path / "timed.txt", [now, now + 3 * 3_600_000, now])
    topic = f"ts-{uuid.uuid4().hex[:8]}"
    try:
        assert main(["produce", topic, str(source), "--timestamped"]) == 2
        assert "line 2: time" in capsys.readouterr().err
        assert kafka_io.partition_count(kafka_config, topic) is None  # not even created
    finally:
        if kafka_io.partition_count(kafka_config, topic) is not None:
            delete_topic(kafka_config, topic)


def test_a_line_older_than_the_topic_accepts_sends_nothing(capsys, tmp_path, kafka_config):
    now = int(time.time() * 1000)
    old = now - 2 * 86_400_000
    source = _timed_file(tmp_path / "timed.txt", [now, old, now])
    topic = f"ts-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka_config, topic, **{"message.timestamp.before.max.ms": "86400000"})
    try:
        assert main(["produce", topic, str(source), "--timestamped"]) == 2
        err = capsys.readouterr().err
        assert f"line 2: time {old}" in err and "message.timestamp.before.max.ms" in err and "86400000" in err
        assert kafka_io.end_offsets(kafka_config, topic) == {0: 0, 1: 0}
    finally:
        delete_topic(kafka_config, topic)
