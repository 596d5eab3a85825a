"""Validation of a session aggregate store on the real stack, without the stream: JSON events on a
topic, a session store of every aggregation written through the library as a stream would have
left it (a brute force sessionizes each key's on-time records by the gap; each session's
accumulators are its records' partials by the stream's own stages), its registry seeded with the
batch, offsets and input settings and its late letters written. It passes, recounted per key and
session from the topic with the late records left out; a session's value tampered with is named by
key, session and measure, by the recompute and by the suite's per-session problems."""

from __future__ import annotations

import json
import random
import time

from pyspark.sql import functions as F

from statestore.core.model import SessionEntry
from statestore.core.windows import SessionSpec
from statestore.maintenance.validate.recount import input_records
from statestore.store.book import deadletters, registry
from statestore.store.book.registry import BatchPosition, InputSettings, KafkaOffsets
from statestore.store.builder import StoreBuilder
from statestore.store.tables.partitioned_session import SessionChange
from statestore.stream import aggregates
from statestore.stream.batches import stored_json_input
from statestore.stream.json_input import KEY, REASON, TIME_MS, parsed_records
from tests.integration.conftest import produce_lines
from tests.integration.maintenance.test_maintenance_audit import load_job
from tests.integration.maintenance.test_validate_aggregates import MEASURES

GAP, GRACE = 30_000, 10_000
SETTINGS = InputSettings("json", ("shop",), None, "ts")


def _events(rng: random.Random, base: int) -> list[dict]:
    """Bursts of events per shop, a burst's events less than the gap apart, bursts further."""
    events = []
    for shop in range(3):
        for burst in range(4):
            t = base + burst * 5 * GAP + rng.randrange(GAP)
            for _ in range(rng.randrange(1, 8)):
                t += rng.randrange(GAP // 2)
                user, amount = f"u{rng.randrange(50)}", rng.randrange(-50, 10**4)
                events.append({"shop": f"shop{shop}", "user": user, "amount": amount, "pos": {"n": t}, "ts": t})
    return events


def _sessions(times: list[int]) -> list[tuple[int, int]]:
    """A brute force of one key's sessions: its times, ascending, cut where more than the gap apart."""
    cut, ordered = [], sorted(times)
    for t in ordered:
        if cut and t - cut[-1][1] <= GAP:
            cut[-1][1] = t
        else:
            cut.append([t, t])
    return [tuple(s) for s in cut]


def _validate(keyspace, store, report_dir) -> tuple[int, dict]:
    argv = ["--keyspace", keyspace, "--store", store, "--report-dir", str(report_dir)]
    code = load_job("validate_idempotency").main(argv)
    return code, json.loads((report_dir / "validate_idempotency.json").read_text())


def test_a_session_aggregate_store_validates_per_session_and_a_tampered_session_is_named(
    spark, session, keyspace, kafka_config, ordered_topic, store_name, tmp_path, capsys
):
    topic, rng = ordered_topic, random.Random(4747)
    events = _events(rng, int(time.time() * 1000) - 3_600_000)
    rng.shuffle(events)
    lines = [json.dumps(e) for e in events] + ['{"shop": "shop1", ']  # and one the input stage cannot count
    produce_lines(kafka_config, topic, lines)
    builder = StoreBuilder(session, store_name).with_keyspace(keyspace).with_value_codec("aggregate:" + MEASURES)
    store = builder.partitioned_session_store(SessionSpec(GAP, GRACE), 3).create()
    spec = store.spec
    registry.record_input_settings(session, spec, SETTINGS)
    now = max(e["ts"] for e in events)
    position = BatchPosition(batch_id=0, write_ts=1, start=None, end=KafkaOffsets.of({topic: {"0": len(lines)}}))
    registry.record_batch(session, spec, position, now)

    # Late: five records their batch judged past the grace (their letters keep that stream time).
    late = {offset: events[offset]["ts"] + GRACE + 1 + rng.randrange(GAP) for offset in rng.sample(range(40), 5)}
    deadletters.ensure_table(session, keyspace, store_name)
    letters = [
        deadletters.DeadLetter(topic, 0, o, None, deadletters.LATE, "late", lines[o].encode(), 0, at)
        for o, at in late.items()
    ]
    deadletters.write(session, keyspace, store_name, letters)

    # The store as the stream leaves it: the brute force's sessions, each its records' partials.
    progress = registry.progress(session, keyspace, store_name)
    stage = stored_json_input(spec.value_codec, SETTINGS)
    parsed = parsed_records(input_records(spark, kafka_config, progress, "earliest"), stage)
    on_time = [(i, e) for i, e in enumerate(events) if i not in late]
    sessions = {
        (shop, *bounds)
        for shop in {e["shop"] for e in events}
        for bounds in _sessions([e["ts"] for _, e in on_time if e["shop"] == shop])
    }
    tag = {
        i: next(f"{k}|{s}|{e}" for k, s, e in sessions if k == ev["shop"] and s <= ev["ts"] <= e) for i, ev in on_time
    }
    tags = spark.createDataFrame(list(tag.items()), "offset long, tag string")
    tagged = parsed.join(tags, "offset").withColumn(KEY, F.col("tag")).filter(F.col(REASON).isNull())
    rows = []
    for r in aggregates.partials(tagged, stage).collect():
        key, start, end = r[KEY].split("|")
        delta = aggregates.delta_of(tuple(r), stage.aggregate)
        value = stage.aggregate.pack(delta.accumulators)
        rows.append(SessionEntry(key.encode(), int(start), int(end), value, 0, r[TIME_MS]))
    assert sorted((e.key.decode(), e.start_ms, e.end_ms) for e in rows) == sorted(sessions)
    store.table.apply(session, [SessionChange((), (e,)) for e in rows], 4, None)

    code, report = _validate(keyspace, store_name, tmp_path / "pass")
    assert code == 0, report
    recompute = report["recompute"]
    assert (recompute["differences"], recompute["counted_per"], recompute["not_compared"]) == (0, "session", 0)
    assert (recompute["input_words"], recompute["uncountable"]) == (len(events) - 5, 6)  # late and unparsable
    assert recompute["store_entries"] == recompute["input_keys"] == len(sessions) > 8
    assert report["quality"]["passed"]

    # One session's count made wrong (and negative) through the table, its other measures kept.
    chosen = rows[0]
    held = stage.aggregate.unpack(chosen.value)
    tampered = list(held)
    tampered[0] = -1
    store.table.apply(
        session,
        [
            SessionChange(
                (),
                (
                    SessionEntry(
                        chosen.key, chosen.start_ms, chosen.end_ms, stage.aggregate.pack(tampered), 0, chosen.time_ms
                    ),
                ),
            )
        ],
        1,
        None,
    )
    code, report = _validate(keyspace, store_name, tmp_path / "fail")
    assert code == 3
    key = chosen.key.decode()
    found = {
        (d["key"], d["window_start"], d["window_end"], d["kind"], d["measure"])
        for d in report["recompute"]["first_differences"]
    }
    assert found == {(key, chosen.start_ms, chosen.end_ms, "measure", "n")}
    assert f"'{key}' in [{chosen.start_ms}, {chosen.end_ms}] (measure n: store -1" in capsys.readouterr().err
    failed = [e for e in report["quality"]["expectations"] if not e["success"]]
    assert [e["column"] for e in failed] == ["problems"]
    assert failed[0]["examples"] == [f"'{key}' [{chosen.start_ms}, {chosen.end_ms}]: count -1 is negative"]


def test_a_session_aggregate_store_the_stream_wrote_validates(
    spark, session, keyspace, cassandra_config, kafka_config, ordered_topic, store_name, tmp_path
):
    """The job's own session aggregate store, in two runs, the second reaching back past the
    grace (late records, dead letters with their stream time), recounts exactly."""
    from tests.integration.conftest import run_stream

    rng, stream = random.Random(47), {"input_format": "json", "aggregate": MEASURES, "key": "shop", "time_field": "ts"}
    stream |= {"session_gap": GAP, "grace": GRACE}
    base = int(time.time() * 1000) - 3_600_000
    first = _events(rng, base)
    first.sort(key=lambda e: e["ts"])
    produce_lines(kafka_config, ordered_topic, [json.dumps(e) for e in first])
    run_stream(spark, cassandra_config, kafka_config, ordered_topic, store_name, tmp_path / "cp", **stream)
    second = _events(rng, base + 2 * GAP)  # reaching back: most are more than the grace behind
    produce_lines(kafka_config, ordered_topic, [json.dumps(e) for e in second])
    run_stream(spark, cassandra_config, kafka_config, ordered_topic, store_name, tmp_path / "cp", **stream)
    late = [d for d in deadletters.read_all(session, keyspace, store_name) if d.reason == deadletters.LATE]
    assert late and all(d.stream_time_ms is not None for d in late)

    code, report = _validate(keyspace, store_name, tmp_path / "pass")
    assert code == 0, report["recompute"]["first_differences"]
    recompute = report["recompute"]
    assert (recompute["differences"], recompute["counted_per"], recompute["not_compared"]) == (0, "session", 0)
    assert recompute["input_words"] + recompute["uncountable"] == len(first) + len(second)
    assert recompute["uncountable"] == len(late) and recompute["store_entries"] == recompute["input_keys"] > 3
    assert report["quality"]["passed"]
