"""The stream log and `statestore status` on the real stack: a run's states and batches are
recorded as they happen, the status reads them with the lag against Kafka's end offsets, and a
run that cannot take the lease is recorded as refused, with why, and is not the store's state."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from statestore.cli.main import main
from statestore.core.config import StreamConfig
from statestore.http import create_app
from statestore.store.book import registry, stream_log
from statestore.store.book.lease import LeaseHeldError, StoreLease
from statestore.store.book.status import stream_status
from statestore.stream.job import JobConfig, start
from tests.integration.conftest import produce_lines, run_stream

LINES = [f"river stone {i % 7} heron" for i in range(300)]


def _status(capsys, keyspace, store) -> dict:
    code = main(["status", store, "--format", "json", "--keyspace", keyspace])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _metrics(cassandra_config, kafka_config, store) -> dict:
    """/metrics of a fresh app (nothing cached), the samples of `store` (and unlabelled ones)."""
    with TestClient(create_app(cassandra_config, kafka=kafka_config)) as client:
        assert client.get("/stores").status_code == 200  # a routed request, for the latency histogram
        answer = client.get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(answer.text):
        for s in family.samples:
            if s.labels.get("store", store) == store:
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "store"))
                samples[(s.name, labels)] = s.value
    return samples


def test_a_runs_states_batches_and_status(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, capsys
):
    produce_lines(kafka_config, topic, LINES)
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", max_offsets_per_trigger=120)
    progress = registry.progress(session, keyspace, store_name)

    batches = stream_log.recent_batches(session, keyspace, store_name)
    assert [b.batch_id for b in batches] == list(range(progress.last_batch_id, -1, -1))  # newest first, all
    assert len(batches) >= 3 and sum(b.words for b in batches) == 4 * len(LINES)
    assert json.loads(batches[0].end_offsets) == json.loads(progress.offsets)
    assert all(b.keys > 0 and b.written == b.keys and b.skipped == 0 and b.seconds > 0 for b in batches)

    states = list(reversed(stream_log.recent_states(session, keyspace, store_name)))
    assert [s.state for s in states] == ["starting", "waiting_for_lease", "running", "running", "stopping", "stopped"]
    assert len({s.run_id for s in states[2:]}) == 1 and states[2].run_id is not None
    assert states[3].reason == "first batch (0) committed" and 0 < states[3].restart_seconds < 120

    status = _status(capsys, keyspace, store_name)
    assert (status["state"], status["writer"], status["writer_up"]) == ("stopped", None, False)
    assert (status["last_batch_id"], status["lag_total"]) == (progress.last_batch_id, 0)
    assert status["last_restart_s"] == states[3].restart_seconds and status["words_per_s"] > 0
    assert status["last_audit"] is None and status["dead_letters_last_hour"] == 0

    metrics = _metrics(cassandra_config, kafka_config, store_name)
    assert metrics[("statestore_batches_total", ())] == progress.last_batch_id + 1
    assert metrics[("statestore_rows_written_total", ())] == sum(b.written for b in batches)
    assert metrics[("statestore_batch_duration_seconds_count", ())] == len(batches)
    assert metrics[("statestore_stream_state", (("state", "stopped"),))] == 1
    assert metrics[("statestore_writer_up", ())] == 0 and metrics[("statestore_kafka_up", ())] == 1
    assert sum(v for (name, _), v in metrics.items() if name == "statestore_lag_records") == 0
    assert metrics[("statestore_restart_seconds", ())] == states[3].restart_seconds
    assert metrics[("statestore_entries_estimate", ())] >= 0
    routed = (("method", "GET"), ("route", "/stores"), ("status", "200"))
    assert metrics[("statestore_http_request_duration_seconds_count", routed)] == 1

    # Input the stopped stream has not read: the lag grows by exactly that, per partition too.
    produce_lines(kafka_config, topic, LINES[:50])
    status = _status(capsys, keyspace, store_name)
    assert status["lag_total"] == 50 and sum(p["lag"] for p in status["lag"]) == 50
    main(["status", store_name, "--keyspace", keyspace])
    table = capsys.readouterr().out
    assert "stopped since" in table and "50 records" in table and "none: no driver holds" in table
    lag = _metrics(cassandra_config, kafka_config, store_name)
    assert sum(v for (name, _), v in lag.items() if name == "statestore_lag_records") == 50


def test_a_run_that_cannot_take_the_lease_is_recorded_as_refused_not_as_the_stores_state(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    produce_lines(kafka_config, topic, LINES[:10])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    other = StoreLease(session, keyspace, store_name, str(tmp_path / "elsewhere"), 60)
    other.acquire()
    try:
        stream = StreamConfig(topic=topic, store=store_name, checkpoint=str(tmp_path / "cp"))
        job = JobConfig(stream, cassandra_config, kafka_config)
        with pytest.raises(LeaseHeldError):
            start(spark, job)
        latest = stream_log.recent_states(session, keyspace, store_name, 3)
        assert [s.state for s in reversed(latest)] == ["starting", "waiting_for_lease", "refused"]
        assert other.holder in latest[0].reason and {s.writer for s in latest} == {latest[0].writer} != {None}
        # The store's state stays its own stream's (stopped), not the refused run's.
        assert stream_status(session, None, keyspace, store_name).state == "stopped"
    finally:
        other.release()
