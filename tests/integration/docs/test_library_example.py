"""The manual's library example (docs/stores.md, "The library") runs as written (in the test
keyspace) and does what it says."""

from __future__ import annotations

import re
from pathlib import Path

STORES_PAGE = Path(__file__).resolve().parents[3] / "docs" / "stores.md"


def test_library_example_runs(keyspace, monkeypatch):
    section = STORES_PAGE.read_text().split("\n## The library\n", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert '"analytics"' in code
    monkeypatch.setenv("STATESTORE_KEYSPACE", keyspace)
    namespace: dict = {}
    exec(compile(code.replace('"analytics"', repr(keyspace)), "docs/stores.md", "exec"), namespace)
    store = namespace["store"]
    assert list(store.prefix_scan("ho")) == [("home", {"n": 1})]
    assert store.table_options.default_time_to_live == 86_400
    row = store.session.execute(
        "SELECT default_time_to_live FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, "clicks_store"),
    ).one()
    assert row.default_time_to_live == 86_400
