"""End offsets of several topics in one question (what /metrics asks for a keyspace's stores):
each topic's offsets exactly as asked one topic at a time, a topic that does not exist left out."""

from __future__ import annotations

import uuid

from statestore.conn import kafka as kafka_io
from tests.integration.conftest import delete_topic, produce_lines


def test_end_offsets_of_several_topics_match_one_at_a_time(kafka_config, topic):
    other = f"it-ends-{uuid.uuid4().hex[:6]}"
    kafka_io.ensure_topic(kafka_config, other, 2)
    try:
        produce_lines(kafka_config, topic, [f"line {n}" for n in range(7)])
        produce_lines(kafka_config, other, [f"line {n}" for n in range(3)])
        missing = f"it-missing-{uuid.uuid4().hex[:6]}"
        ends = kafka_io.end_offsets_of_topics(kafka_config, [topic, other, missing, topic])
        assert set(ends) == {topic, other}
        assert ends[topic] == kafka_io.end_offsets(kafka_config, topic) and len(ends[topic]) == 4
        assert ends[other] == kafka_io.end_offsets(kafka_config, other) and len(ends[other]) == 2
        assert (sum(ends[topic].values()), sum(ends[other].values())) == (7, 3)
        assert kafka_io.end_offsets_of_topics(kafka_config, []) == {}
    finally:
        delete_topic(kafka_config, other)
