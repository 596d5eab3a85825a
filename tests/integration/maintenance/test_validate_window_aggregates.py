"""Validation of a window aggregate store on the real stack: JSON events through the job into a
hopping-window store of every aggregation, in two runs, the second reaching back past closed
windows (some records late in all their windows, some in a part), pass: recomputed per key and
window from the topic, each record counted in the windows open at the stream time of its late
letter; a window's value tampered with through the library is named by key, window and
measure, by the recompute and by the suite's per-window problems."""

from __future__ import annotations

import json
import random
import time

from statestore.core.aggregation import AggregateSpec
from statestore.store.book import deadletters, registry
from statestore.store.builder import open_window_store
from statestore.store.tables import window_table_for
from tests.integration.conftest import produce_lines, run_stream
from tests.integration.maintenance.test_maintenance_audit import load_job
from tests.integration.maintenance.test_validate_aggregates import MEASURES

SIZE, HOP = 60_000, 20_000
JSON = {"input_format": "json", "aggregate": MEASURES, "key": "shop", "time_field": "ts", "window": SIZE, "hop": HOP}


def _events(rng: random.Random, count: int, low: int, high: int) -> list[str]:
    return [
        json.dumps(
            {
                "shop": f"shop{rng.randrange(4)}",
                "user": f"u{rng.randrange(300)}",
                "amount": rng.randrange(-50, 10**4),
                "pos": {"n": rng.randrange(10**6)},
                "ts": rng.randrange(low, high),
            }
        )
        for _ in range(count)
    ]


def _validate(keyspace, store, report_dir) -> tuple[int, dict]:
    argv = ["--keyspace", keyspace, "--store", store, "--report-dir", str(report_dir)]
    code = load_job("validate_idempotency").main(argv)
    return code, json.loads((report_dir / "validate_idempotency.json").read_text())


def test_a_window_aggregate_store_validates_per_window_and_a_tampered_window_is_named(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, capsys
):
    rng = random.Random(4747)
    base = int(time.time() * 1000) // SIZE * SIZE - 20 * SIZE
    produce_lines(kafka_config, topic, _events(rng, 300, base, base + 5 * SIZE))
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **JSON)
    # Reaching back: some windows of these records closed at the first run's stream time.
    produce_lines(kafka_config, topic, _events(rng, 150, base + 2 * SIZE, base + 6 * SIZE))
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **JSON)
    late = [d for d in deadletters.read_all(session, keyspace, store_name) if d.reason == deadletters.LATE]
    assert late and all(d.stream_time_ms is not None for d in late)

    code, report = _validate(keyspace, store_name, tmp_path / "pass")
    assert code == 0, report
    recompute = report["recompute"]
    assert (recompute["differences"], recompute["input_words"], recompute["counted_per"]) == (0, 450, "window")
    assert recompute["not_compared"] == 0 and recompute["store_entries"] == recompute["input_keys"] > 4
    assert [m["measure"] for m in recompute["measures"]] == ["n", "total", "s", "lo", "hi", "last", "u"]
    assert report["quality"]["passed"]

    # One window's count made wrong (and negative) through the library, its other measures kept.
    spec = registry.lookup(session, keyspace, store_name)
    measures = AggregateSpec.parse(spec.value_codec.removeprefix("aggregate:"))
    windows = open_window_store(session, keyspace, store_name)
    chosen = next(iter(windows.all()))
    held = measures.unpack(window_table_for(spec).get(session, b"" + chosen.key.encode(), chosen.start_ms).value)
    tampered = {m.name: acc for m, acc in zip(measures.measures, held, strict=True)} | {"n": -1}
    assert windows.put(chosen.key, tampered, chosen.start_ms)

    code, report = _validate(keyspace, store_name, tmp_path / "fail")
    assert code == 3
    found = {(d["key"], d["window_start"], d["kind"], d["measure"]) for d in report["recompute"]["first_differences"]}
    assert found == {(chosen.key, chosen.start_ms, "measure", "n")}
    assert (
        f"'{chosen.key}' in [{chosen.start_ms}, {chosen.start_ms + SIZE}] (measure n: store -1"
        in capsys.readouterr().err
    )
    failed = [e for e in report["quality"]["expectations"] if not e["success"]]
    assert [e["column"] for e in failed] == ["problems"]
    assert failed[0]["examples"] == [
        f"'{chosen.key}' [{chosen.start_ms}, {chosen.start_ms + SIZE}]: count -1 is negative"
    ]
