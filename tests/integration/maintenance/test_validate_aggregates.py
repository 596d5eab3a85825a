"""Validation of an aggregate store on the real stack: JSON events through the job into a store
of every aggregation pass (recomputed from the topic with the stream's own stages, the bad and
the future records left out as the stream left them out, the Great Expectations suite); a value
tampered with through the library's put is reported by key and measure, by the recompute and by
the suite's per-entry problems."""

from __future__ import annotations

import json
import random
import time

from statestore.core.aggregation import AggregateSpec
from statestore.store.book import registry
from statestore.store.builder import open_store
from statestore.store.tables import table_for
from tests.integration.conftest import produce_lines, run_stream
from tests.integration.maintenance.test_maintenance_audit import load_job

MEASURES = (
    "n=count(), total=sum_int(amount), s=sum(amount), lo=min(amount), hi=max(amount), last=latest(pos), "
    "u=distinct(user)"
)
JSON = {"input_format": "json", "aggregate": MEASURES, "key": "shop", "time_field": "ts"}


def _events(count: int) -> list[str]:
    rng, now = random.Random(47), int(time.time() * 1000)
    events = [
        {
            "shop": f"shop{rng.randrange(6)}",
            "user": f"u{rng.randrange(400)}",
            "amount": rng.randrange(-50, 10**4),
            "pos": {"n": i},
            "ts": now - 60_000 + i,
        }
        for i in range(count)
    ]
    bad = ['{"shop": "shop1", ', json.dumps({"shop": "shop2", "user": "u", "amount": 1.5, "pos": 0, "ts": now})]
    future = json.dumps({"shop": "shop3", "user": "u", "amount": 7, "pos": -1, "ts": now + 3_600_000})
    return [json.dumps(e) for e in events] + bad + [future]


def _validate(keyspace, store, report_dir) -> tuple[int, dict]:
    argv = ["--keyspace", keyspace, "--store", store, "--report-dir", str(report_dir)]
    code = load_job("validate_idempotency").main(argv)
    return code, json.loads((report_dir / "validate_idempotency.json").read_text())


def test_an_aggregate_store_validates_and_a_tampered_measure_is_named(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path, capsys
):
    produce_lines(kafka_config, topic, _events(1200))
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **JSON)

    code, report = _validate(keyspace, store_name, tmp_path / "pass")
    assert code == 0, report
    recompute = report["recompute"]
    assert (recompute["differences"], recompute["input_words"], recompute["input_keys"]) == (0, 1200, 6)
    assert recompute["uncountable"] == 2  # the bad records; the future one is left out, as the stream left it
    assert [m["measure"] for m in recompute["measures"]] == ["n", "total", "s", "lo", "hi", "last", "u"]
    assert report["quality"]["passed"]
    assert "problems" in [e["column"] for e in report["quality"]["expectations"]]
    assert "Measures checked" in (tmp_path / "pass" / "validate_idempotency.md").read_text()

    # One stored count made wrong (and negative) through the library, the other measures kept.
    spec = registry.lookup(session, keyspace, store_name)
    measures = AggregateSpec.parse(spec.value_codec.removeprefix("aggregate:"))
    held = measures.unpack(table_for(spec).get(session, b"shop4").value)
    tampered = {m.name: acc for m, acc in zip(measures.measures, held, strict=True)} | {"n": -1}
    open_store(session, keyspace, store_name).put("shop4", tampered)

    code, report = _validate(keyspace, store_name, tmp_path / "fail")
    assert code == 3
    found = {(d["key"], d["kind"], d["measure"]) for d in report["recompute"]["first_differences"]}
    assert ("shop4", "measure", "n") in found and {d[0] for d in found} == {"shop4"}
    assert "'shop4' (measure n: store -1, input" in capsys.readouterr().err
    failed = [e for e in report["quality"]["expectations"] if not e["success"]]
    assert [e["column"] for e in failed] == ["problems"]
    assert failed[0]["examples"] == ["'shop4': count -1 is negative"]
