"""The per-batch topic-id question waits out a Kafka without a controller (a broker lost under the
stream) for a bounded time, each time through a new client, and fails at once on an error that
asking again cannot mend."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as KafkaErrorCode
from confluent_kafka import KafkaException

from statestore.conn.kafka import TopicIds
from statestore.core.config import KafkaConfig
from statestore.core.errors import KafkaError


class _Described:
    def __init__(self, outcome):
        self.outcome = outcome

    def result(self):
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


class _TopicId:
    topic_id = "AbCdEf"


class StandInAdmin:
    """Answers describe_topics with the outcomes given, one per call, whichever client asks;
    `clients` counts the clients made (each a connection of TopicIds)."""

    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)
        self.calls = 0
        self.clients = 0
        self.asked_by: list[int] = []

    def __call__(self, problems):
        self.clients += 1
        return _Client(self, self.clients)


class _Client:
    def __init__(self, admin: StandInAdmin, number: int):
        self.admin, self.number = admin, number

    def describe_topics(self, topics, request_timeout):
        self.admin.calls += 1
        self.admin.asked_by.append(self.number)
        return {"words": _Described(self.admin.outcomes.pop(0))}

    def poll(self, timeout):
        return 0


def _failure(code: int, retriable: bool = False) -> KafkaException:
    return KafkaException(KafkaErrorCode(code, "Timed out waiting for controller", retriable=retriable))


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr("statestore.conn.kafka.time.sleep", lambda s: None)


def test_a_timed_out_question_is_asked_again_until_kafka_answers():
    admin = StandInAdmin(_failure(KafkaErrorCode._TIMED_OUT), _failure(KafkaErrorCode._TIMED_OUT), _TopicId())
    assert TopicIds(KafkaConfig(), patience_s=60, new_admin=admin).of("words") == "AbCdEf"
    assert admin.calls == 3
    # Each attempt after a failure through a new client: the old one may wait on a lost controller.
    assert admin.asked_by == [1, 2, 3]


def test_a_lost_connection_to_the_broker_asked_is_asked_again_through_a_new_client():
    """The broker the question went to killed mid-request: librdkafka reports a transport
    failure, not marked retriable (the cluster test of a killed controller met it)."""
    admin = StandInAdmin(_failure(KafkaErrorCode._TRANSPORT), _TopicId())
    assert TopicIds(KafkaConfig(), patience_s=60, new_admin=admin).of("words") == "AbCdEf"
    assert admin.asked_by == [1, 2]


def test_a_retriable_error_is_asked_again():
    admin = StandInAdmin(_failure(KafkaErrorCode.LEADER_NOT_AVAILABLE, retriable=True), _TopicId())
    assert TopicIds(KafkaConfig(), patience_s=60, new_admin=admin).of("words") == "AbCdEf"


def test_past_its_patience_the_stream_stops_with_a_clear_error():
    admin = StandInAdmin(*[_failure(KafkaErrorCode._TIMED_OUT)] * 3)
    with pytest.raises(KafkaError, match="cannot reach Kafka"):
        TopicIds(KafkaConfig(), patience_s=0, new_admin=admin).of("words")
    assert admin.calls == 1


def test_an_error_asking_again_cannot_mend_fails_at_once():
    admin = StandInAdmin(_failure(KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED), _TopicId())
    with pytest.raises(KafkaError):
        TopicIds(KafkaConfig(), patience_s=60, new_admin=admin).of("words")
    assert admin.calls == 1


def test_a_missing_topic_is_none_not_an_error():
    admin = StandInAdmin(KafkaException(KafkaErrorCode(KafkaErrorCode.UNKNOWN_TOPIC_OR_PART)))
    assert TopicIds(KafkaConfig(), patience_s=60, new_admin=admin).of("words") is None
