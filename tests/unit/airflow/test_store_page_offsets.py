"""The store list asks Kafka once for the end offsets of the page's topics (end_offsets_for): the
answer serves every store of the page; a Kafka that does not answer fails each store's lag with
its reason, never the page. Kafka's client stubbed: argument plumbing only."""

from __future__ import annotations

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
import pytest
from statestore_airflow import store_monitor

from statestore.core.config import KafkaConfig
from statestore.core.errors import KafkaError


def test_one_question_for_every_topic_of_the_page(monkeypatch):
    asked = []

    def ends_of(config, topics):
        asked.append(sorted(topics))
        return {"a": {0: 5, 1: 7}}

    monkeypatch.setattr(store_monitor, "end_offsets_of_topics", ends_of)
    source = store_monitor.end_offsets_for(KafkaConfig(), {"a", "gone"})
    assert (source("a"), source("gone")) == ({0: 5, 1: 7}, None)  # a topic not found: no lag
    assert asked == [["a", "gone"]]
    assert store_monitor.end_offsets_for(None, {"a"}) is None


def test_a_kafka_that_does_not_answer_fails_each_lag_with_its_reason(monkeypatch):
    def unreachable(config, topics):
        raise KafkaError("cannot reach Kafka at nowhere:9092")

    monkeypatch.setattr(store_monitor, "end_offsets_of_topics", unreachable)
    source = store_monitor.end_offsets_for(KafkaConfig(), {"a"})
    with pytest.raises(KafkaError, match="cannot reach Kafka"):
        source("a")


def test_the_dead_letter_charts_caption_names_its_hours(monkeypatch):
    """Under the chart of dead letters per hour, the total and over how many hours (the page
    said "0 in the last hours, per hour")."""
    from statestore_airflow import charts

    monkeypatch.setattr(store_monitor.stream_log, "recent_batches", lambda *args: [])
    hours = [charts.Point(v, f"hour {i}") for i, v in enumerate([0, 0, 0, 1_200, 0, 34])]
    monkeypatch.setattr(store_monitor, "dead_letters_per_hour", lambda *args: hours)
    drawn = store_monitor.batch_charts(None, "ks", "words", now_ms=0)
    assert drawn["dead_letters_note"] == f"1,234 in the last {store_monitor.DEAD_LETTER_HOURS} hours, per hour."
