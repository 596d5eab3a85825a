"""Validation of window and session stores on the real stack: stores the windowed and
sessioned streams wrote, with late records (some counted in a part of their windows), pass;
a changed, removed or invented window or session fails and is named with its bounds."""

from __future__ import annotations

import json
import random
import uuid

import pytest

from statestore.conn import kafka as kafka_io
from statestore.core.codecs import LONG
from statestore.core.event_time import TimedValue
from statestore.core.model import PaneEntry
from statestore.store.book import deadletters
from statestore.store.builder import open_session_store, open_window_store
from statestore.store.session import SessionKey
from statestore.store.tables import window_table_for
from tests.integration.conftest import delete_topic, run_stream
from tests.integration.maintenance.test_maintenance_audit import load_job
from tests.integration.stream.test_windowed_wordcount import BASE_MS, Reference, _records

MINUTE, DAY = 60_000, 86_400_000
SIZE, HOP = MINUTE, 20_000
GAP, GRACE = 30_000, 20_000


def _stream(spark, cassandra_config, kafka_config, batches, checkpoint, **windows) -> dict:
    topic, store = f"it-vt-{uuid.uuid4().hex[:6]}", f"vt{uuid.uuid4().hex[:10]}"
    kafka_io.ensure_topic(kafka_config, topic, 3)
    for records in batches:
        kafka_io.produce(kafka_config, topic, [TimedValue(text.encode(), t) for t, text in records])
        run_stream(spark, cassandra_config, kafka_config, topic, store, checkpoint, **windows)
    return {"topic": topic, "store": store}


def _validate(keyspace, store, report_dir, *extra) -> tuple[int, dict]:
    argv = ["--keyspace", keyspace, "--store", store, "--report-dir", str(report_dir), *extra]
    code = load_job("validate_idempotency").main(argv)
    return code, json.loads((report_dir / "validate_idempotency.json").read_text())


@pytest.fixture(scope="module")
def window_store(spark, cassandra_config, kafka_config, tmp_path_factory):
    """A hopping-window store fed in three batches; the later two reach back past closed windows."""
    rng = random.Random(1616)
    batches = [
        _records(rng, 200, BASE_MS + MINUTE, BASE_MS + 5 * MINUTE, "a"),
        _records(rng, 120, BASE_MS + 5 * MINUTE, BASE_MS + 6 * MINUTE, "b")
        + _records(rng, 80, BASE_MS + 2 * MINUTE, BASE_MS + 5 * MINUTE, "c"),
        _records(rng, 60, BASE_MS + 3 * MINUTE, BASE_MS + 6 * MINUTE, "d"),
    ]
    reference = Reference(SIZE, HOP, 0, DAY)
    partly_late = 0
    for records in batches:
        for t, _ in records:  # late, yet counted in some of its windows: needs the letter's stream time
            closed = [reference.closed(s) for s in reference.windows(t)]
            partly_late += any(closed) and not all(closed)
        reference.batch(records)
    checkpoint = tmp_path_factory.mktemp("validate-windows") / "checkpoint"
    made = _stream(spark, cassandra_config, kafka_config, batches, checkpoint, window=SIZE, hop=HOP)
    yield {**made, "reference": reference, "partly_late": partly_late}
    delete_topic(kafka_config, made["topic"])


@pytest.fixture(scope="module")
def session_store(spark, cassandra_config, kafka_config, tmp_path_factory):
    rng = random.Random(77)
    batches = []
    for n, (low, high) in enumerate([(0, 300_000), (200_000, 600_000), (100_000, 650_000)]):
        times = [BASE_MS + rng.randrange(low, high) for _ in range(120)]
        batches.append([(t, f"{rng.choice(['heron', 'weir', 'ford'])} s{n}r{i}") for i, t in enumerate(times)])
    checkpoint = tmp_path_factory.mktemp("validate-sessions") / "checkpoint"
    made = _stream(spark, cassandra_config, kafka_config, batches, checkpoint, session_gap=GAP, grace=GRACE)
    yield made
    delete_topic(kafka_config, made["topic"])


def test_a_windowed_store_with_late_records_passes(window_store, session, keyspace, tmp_path):
    reference = window_store["reference"]
    assert reference.late and window_store["partly_late"] > 0  # the corpus has records counted in part
    letters = [d for d in deadletters.read_all(session, keyspace, window_store["store"])]
    assert len(letters) == sum(reference.late.values())
    assert all(d.reason == deadletters.LATE and d.stream_time_ms is not None for d in letters)

    code, report = _validate(keyspace, window_store["store"], tmp_path)
    recompute = report["recompute"]
    assert code == 0, recompute["first_differences"]
    assert recompute["counted_per"] == "window" and recompute["differences"] == 0
    counted = sum(reference.counts.values())
    assert (recompute["input_words"], recompute["store_sum"]) == (counted, counted)
    assert (recompute["input_keys"], recompute["store_entries"]) == (len(reference.counts), len(reference.counts))
    assert report["quality"]["passed"] and report["replay"] is None
    assert "replays re-apply key-value batches only" in (tmp_path / "validate_idempotency.md").read_text()


def test_a_sessioned_store_with_late_records_passes_and_a_changed_session_fails(
    session_store, session, keyspace, tmp_path, capsys
):
    store = session_store["store"]
    assert any(d.reason == deadletters.LATE for d in deadletters.read_all(session, keyspace, store))
    code, report = _validate(keyspace, store, tmp_path / "before")
    assert code == 0, report["recompute"]["first_differences"]
    assert report["recompute"]["counted_per"] == "session" and report["quality"]["passed"]

    sessions = open_session_store(session, keyspace, store)
    victim = min(sessions.fetch("heron"), key=lambda s: s.start_ms)
    sessions.put(SessionKey("heron", victim.start_ms, victim.end_ms), victim.value + 1)
    code, report = _validate(keyspace, store, tmp_path / "after", "--no-quality")
    assert code == 3
    [difference] = report["recompute"]["first_differences"]
    assert (difference["key"], difference["kind"], difference["stored"]) == ("heron", "count", victim.value + 1)
    assert (difference["window_start"], difference["window_end"]) == (victim.start_ms, victim.end_ms)
    assert f"'heron' in [{victim.start_ms}, {victim.end_ms}] (count" in capsys.readouterr().err


def test_changed_removed_and_invented_windows_fail_and_are_named(window_store, session, keyspace, tmp_path):
    """The stream keeps this hopping store as panes, so the tampering is done to pane rows: a row
    (key, pane s, from s) counts in window s alone; a record's unique tag word has one row, in
    every window of its record that was open."""
    windows = open_window_store(session, keyspace, window_store["store"])
    table = window_table_for(windows.spec)
    assert windows.spec.windowing.panes
    stored = sorted(windows.all(), key=lambda w: (w.key, w.start_ms))
    bumped = stored[0]
    home = (bumped.key.encode(), bumped.start_ms, bumped.start_ms)
    extra = table.read_panes(session, [home], 1).get(home)
    plus_one = 1 if extra is None else LONG.decode(extra.value) + 1
    invented = BASE_MS + 4 * MINUTE
    table.write_panes(
        session,
        [
            PaneEntry(*home, LONG.encode(plus_one), 0, bumped.start_ms),
            PaneEntry(b"intruder", invented, invented, LONG.encode(5), 0, invented),
        ],
        1,
        None,
    )
    tag = next(w.key for w in stored if w.key.startswith("a") and w.key != bumped.key)
    removed = [w for w in stored if w.key == tag]
    # Its record's pane is its last window's start: delete the tag's rows in those segments.
    for segment in {windows.spec.windowing.segment_of(w.start_ms) for w in removed}:
        session.execute(
            f"DELETE FROM {table.qualified} WHERE partition = %s AND segment = %s AND key = %s",
            (table.partition_of(tag.encode()), segment, tag.encode()),
        )

    code, report = _validate(keyspace, window_store["store"], tmp_path)
    assert code == 3 and report["status"] == "fail"
    found = {
        (d["key"], d["window_start"], d["window_end"], d["kind"]) for d in report["recompute"]["first_differences"]
    }
    assert found == {
        (bumped.key, bumped.start_ms, bumped.start_ms + SIZE, "count"),
        *((tag, w.start_ms, w.start_ms + SIZE, "missing") for w in removed),
        ("intruder", invented, invented + SIZE, "unexpected"),
    }
    failed = {e["expectation"] for e in report["quality"]["expectations"] if not e["success"]}
    assert "expect_column_sum_to_be_between" in failed


def test_a_dead_letter_table_of_an_older_release_gains_the_stream_time_column(session, keyspace):
    store = f"old{uuid.uuid4().hex[:8]}"
    old_shape = deadletters.create_cql(keyspace, store).replace(" stream_time timestamp,", "")
    assert "stream_time" not in old_shape
    session.execute(old_shape)
    deadletters.ensure_table(session, keyspace, store)
    letter = deadletters.DeadLetter("t", 0, 7, 1, deadletters.LATE, "late", b"x", 3, 1234)
    deadletters.write(session, keyspace, store, [letter])
    assert list(deadletters.read_all(session, keyspace, store)) == [letter]
    session.execute(f"DROP TABLE {keyspace}.{store}_deadletters")
