"""Idempotency validation on the real stack: a store the stream wrote passes; one with an
injected wrong count or a non-replay-safe row fails and names the key; expiry is allowed for."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Producer

from statestore.conn import kafka as kafka_io
from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import Entry
from statestore.store.book import registry
from statestore.store.tables import table_for
from statestore.stream.position import now_micros
from tests.integration.conftest import delete_topic, run_stream
from tests.integration.maintenance.test_maintenance_audit import load_job

NOW_MS = int(time.time() * 1000)
OLD_MS = NOW_MS - 5 * 86_400_000


def produce_at(kafka_config, topic: str, lines: list[str], timestamp_ms: int) -> None:
    producer = Producer({"bootstrap.servers": kafka_config.bootstrap_servers, "linger.ms": 20})
    for line in lines:
        producer.produce(topic, value=line.encode("utf-8"), timestamp=timestamp_ms)
    assert producer.flush(30) == 0


# Five days old: words only seen then ("ancient*"), and words seen then and again now ("revived*").
OLD_LINES = [f"common Ancient{i % 40} revived{i % 10} the END." for i in range(300)]
NEW_LINES = [f"common fresh{i % 50}, Ünïcode {i} the" for i in range(400)]
LATER_LINES = [f"common revived{i % 10} later{i % 7}" for i in range(100)]


@pytest.fixture(scope="module")
def stream_store(spark, session, keyspace, cassandra_config, kafka_config, tmp_path_factory):
    """A store written by the real stream in several batches, with its checkpoint."""
    topic = f"it-validate-{uuid.uuid4().hex[:6]}"
    kafka_io.ensure_topic(kafka_config, topic, 3)
    produce_at(kafka_config, topic, OLD_LINES, OLD_MS)
    produce_at(kafka_config, topic, NEW_LINES, NOW_MS)
    store = f"v{uuid.uuid4().hex[:10]}"
    checkpoint = tmp_path_factory.mktemp("validate") / "checkpoint"
    run_stream(spark, cassandra_config, kafka_config, topic, store, checkpoint, max_offsets_per_trigger=250)
    yield {"topic": topic, "store": store, "checkpoint": str(checkpoint)}
    delete_topic(kafka_config, topic)


def argv(keyspace, store, report_dir, *extra):
    return ["--keyspace", keyspace, "--store", store, "--report-dir", str(report_dir), *extra]


def test_untouched_store_passes_every_check(stream_store, keyspace, tmp_path):
    code = load_job("validate_idempotency").main(
        argv(
            keyspace,
            stream_store["store"],
            tmp_path,
            "--checkpoint",
            stream_store["checkpoint"],
            "--replay-batches",
            "2",
        )
    )
    report = json.loads((tmp_path / "validate_idempotency.json").read_text())
    assert code == 0, report
    assert report["status"] == "pass"
    recompute = report["recompute"]
    words = sum(len(line.split()) for line in OLD_LINES + NEW_LINES)
    assert (recompute["differences"], recompute["input_words"], recompute["store_sum"]) == (0, words, words)
    replay = report["replay"]
    assert replay["passed"] and len(replay["batches"]) == 2 and replay["rows_rewritten"] == 0
    assert report["quality"]["passed"] and len(report["quality"]["expectations"]) == 8
    assert (tmp_path / "data_docs" / "index.html").is_file()
    assert (tmp_path / "validate_idempotency_differences.jsonl").read_text() == ""


def test_counts_restarted_by_expiry_still_pass(
    stream_store, spark, keyspace, cassandra_config, kafka_config, session, tmp_path
):
    store = stream_store["store"]
    expire = ["--keyspace", keyspace, "--store", store, "--retention", "1d", "--report-dir", str(tmp_path / "expire")]
    assert load_job("expire_state").main(expire) == 0
    removed = json.loads((tmp_path / "expire" / "expire_state.json").read_text())["stores"][0]["removed"]
    assert removed == 40 + 10 + 1  # ancient0-39, revived0-9 and "end": only in the old lines
    # The revived words come again: their counts start from zero, below the input's total.
    produce_at(kafka_config, stream_store["topic"], LATER_LINES, NOW_MS + 1000)
    run_stream(spark, cassandra_config, kafka_config, stream_store["topic"], store, stream_store["checkpoint"])
    code = load_job("validate_idempotency").main(
        argv(keyspace, store, tmp_path, "--replay-batches", "0", "--no-quality")
    )
    recompute = json.loads((tmp_path / "validate_idempotency.json").read_text())["recompute"]
    assert code == 0, recompute
    assert recompute["expired_before_ms"] is not None
    assert recompute["words_at_least"] < recompute["store_sum"] < recompute["input_words"]


def test_injected_wrong_count_and_unsafe_row_fail_and_are_named(stream_store, keyspace, session, tmp_path, capsys):
    spec = registry.lookup(session, keyspace, stream_store["store"])
    table = table_for(spec)
    # One count too high, one zeroed (which the Great Expectations suite catches too: counts are
    # at least 1; after expiry the sum is only bounded, so one extra word passes it).
    for key, change in ((b"fresh7", 1), (b"fresh8", None)):
        old = table.get(session, key)
        value = encode_long(0 if change is None else decode_long(old.value) + change)
        table.write_entries(session, [Entry(key, value, old.batch_id, old.time_ms)], 1, now_micros())
    # "later3" was written by the last batch; claiming an older batch makes a replay add it again.
    unsafe = table.get(session, b"later3")
    last = registry.progress(session, keyspace, spec.name).last_batch_id
    assert unsafe.batch_id == last
    table.write_entries(session, [Entry(b"later3", unsafe.value, last - 1, unsafe.time_ms)], 1, now_micros())

    code = load_job("validate_idempotency").main(
        argv(keyspace, spec.name, tmp_path, "--checkpoint", stream_store["checkpoint"], "--replay-batches", "1")
    )
    report = json.loads((tmp_path / "validate_idempotency.json").read_text())
    assert code == 3
    message = capsys.readouterr().err
    assert "'fresh7' (count: store" in message and "'fresh8' (count: store 0" in message and "'later3'" in message
    assert report["status"] == "fail"
    differences = [(d["key"], d["kind"]) for d in report["recompute"]["first_differences"]]
    assert differences == [("fresh7", "count"), ("fresh8", "count")]
    assert report["replay"]["changed_keys"] == ["later3"] and not report["replay"]["passed"]
    failed = [(e["expectation"], e["column"]) for e in report["quality"]["expectations"] if not e["success"]]
    assert failed == [("expect_column_values_to_be_between", "value")]
    listed = (tmp_path / "validate_idempotency_differences.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["key"] for line in listed) == ["fresh7", "fresh8"]
