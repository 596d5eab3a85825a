"""`statestore produce --timestamped` against the real Kafka: each line's time becomes its
record's timestamp, and a bad line is named before anything is sent."""

from __future__ import annotations

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
