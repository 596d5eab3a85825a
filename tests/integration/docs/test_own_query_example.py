"""The manual's own-query example (docs/aggregations.md, "From your own query") runs as written
(on the test's topic, store, keyspace and checkpoint) and keeps what it says: the measures per
region of the orders that are not cancelled, an order of an unknown shop a dead letter."""

from __future__ import annotations

import json
import re
from pathlib import Path

from statestore.store.book import deadletters
from statestore.store.builder import open_store
from tests.integration.conftest import produce_lines

PAGE = Path(__file__).resolve().parents[3] / "docs" / "aggregations.md"


def test_the_own_query_example_runs_and_keeps_its_measures(
    spark, session, keyspace, kafka_config, topic, store_name, tmp_path, monkeypatch
):
    section = PAGE.read_text().split("\n## From your own query\n", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    for placeholder in ('"orders"', '"revenue_by_region"', '"/tmp/checkpoints/revenue_by_region"'):
        assert placeholder in code
    code = code.replace('"orders"', repr(topic)).replace('"revenue_by_region"', repr(store_name))
    code = code.replace('"/tmp/checkpoints/revenue_by_region"', repr(str(tmp_path / "cp")))
    monkeypatch.setenv("STATESTORE_KEYSPACE", keyspace)
    orders = [
        {"shop": "s1", "customer": "ann", "amount": 1250, "status": "paid", "ts": 1795946400000},
        {"shop": "s1", "customer": "bob", "amount": 300, "ts": 1795946401000},
        {"shop": "s1", "customer": "cy", "amount": 7000, "status": "cancelled", "ts": 1795946402000},
        {"shop": "s2", "customer": "ann", "amount": 990, "status": "paid", "ts": 1795946403000},
        {"shop": "s9", "customer": "dee", "amount": 5, "status": "paid", "ts": 1795946404000},
    ]
    produce_lines(kafka_config, topic, [json.dumps(o) for o in orders])

    exec(compile(code, "docs/aggregations.md", "exec"), {"spark": spark})

    store = open_store(session, keyspace, store_name)
    north, south = store.get("north"), store.get("south")
    assert {**north, "who": round(north["who"])} == {"n": 2, "revenue": 1550, "who": 2}  # who: an estimate
    assert {**south, "who": round(south["who"])} == {"n": 1, "revenue": 990, "who": 1}
    letters = list(deadletters.read_all(session, keyspace, store_name))
    assert [(d.reason, bytes(d.raw)) for d in letters] == [(deadletters.MISSING_KEY, json.dumps(orders[4]).encode())]
