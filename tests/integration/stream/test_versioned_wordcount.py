"""The word count into versioned stores: exact counts, and one version per batch per changed
word, valid from the batch's largest Kafka record timestamp.

Records are produced with explicit timestamps, so the expected versions are known exactly.
Each available-now run reads what was produced since the last one as one batch.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from statestore.store.book import registry
from statestore.store.builder import open_store
from statestore.store.versioned import VersionedRecord
from tests.integration.conftest import dump, run_stream

T0 = 1_700_000_000_000


def _produce_at(kafka_config, topic: str, lines: list[tuple[str, int]]) -> None:
    """Send each line with its own record timestamp (epoch ms)."""
    producer = Producer({"bootstrap.servers": kafka_config.bootstrap_servers})
    for text, timestamp in lines:
        producer.produce(topic, value=text.encode("utf-8"), timestamp=timestamp)
    assert producer.flush(30) == 0, "Kafka did not acknowledge every message"


def _histories(store, words) -> dict[str, list[tuple]]:
    return {w: [(v.value, v.valid_from, v.valid_to) for v in store.history(w)] for w in words}


@pytest.mark.parametrize("store_type", ["partitioned-versioned", "global-versioned"])
def test_each_batch_writes_one_version_per_changed_word(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, store_type
):
    checkpoint = tmp_path / "cp"

    # Batch 1: the largest record time is T0 + 500, so every version starts there.
    _produce_at(kafka_config, topic, [("apple banana", T0), ("Apple cherry", T0 + 500)])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint, store_type=store_type)
    assert registry.lookup(session, keyspace, store_name).store_type.value == store_type
    store = open_store(session, keyspace, store_name)
    assert dump(session, keyspace, store_name) == {"apple": 2, "banana": 1, "cherry": 1}
    words = ["apple", "banana", "cherry", "date"]
    assert _histories(store, words) == {
        "apple": [(2, T0 + 500, None)],
        "banana": [(1, T0 + 500, None)],
        "cherry": [(1, T0 + 500, None)],
        "date": [],
    }

    # Batch 2 (largest time T0 + 3000): changed words get a second version, which ends the first.
    _produce_at(kafka_config, topic, [("banana date", T0 + 1000), ("apple", T0 + 3000)])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint)
    assert dump(session, keyspace, store_name) == {"apple": 3, "banana": 2, "cherry": 1, "date": 1}
    assert _histories(store, words) == {
        "apple": [(2, T0 + 500, T0 + 3000), (3, T0 + 3000, None)],
        "banana": [(1, T0 + 500, T0 + 3000), (2, T0 + 3000, None)],
        "cherry": [(1, T0 + 500, None)],  # unchanged: still one version
        "date": [(1, T0 + 3000, None)],
    }
    assert store.get("apple", as_of=T0 + 2999) == VersionedRecord(2, T0 + 500, T0 + 3000)
    assert store.get("apple", as_of=T0 + 499) is None

    # Batch 3 holds late records (largest time T0 + 2000): cherry's current version started
    # earlier, so it gets a new one; apple's started later, so it is updated in place rather
    # than given a version in the past.
    _produce_at(kafka_config, topic, [("cherry", T0 + 2000), ("apple", T0 + 100)])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint)
    assert dump(session, keyspace, store_name) == {"apple": 4, "banana": 2, "cherry": 2, "date": 1}
    assert _histories(store, ["apple", "cherry"]) == {
        "apple": [(2, T0 + 500, T0 + 3000), (4, T0 + 3000, None)],
        "cherry": [(1, T0 + 500, T0 + 2000), (2, T0 + 2000, None)],
    }
    assert [k for k, _ in store.all()] == sorted(words)
