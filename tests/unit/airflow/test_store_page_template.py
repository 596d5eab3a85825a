"""A store's page as its template words it, rendered from the figures alone (no Cassandra): the
figures the route reads are given, every other one left undefined."""

from __future__ import annotations

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
import re

from jinja2 import ChainableUndefined, Undefined
from statestore_airflow import store_page


def _render(**figures) -> str:
    env = store_page._TEMPLATES.overlay(undefined=ChainableUndefined)

    def lenient(wording):  # the page's wording of a figure, empty for one this test leaves out
        return lambda *args: "" if any(isinstance(a, Undefined) for a in args) else wording(*args)

    helpers = {k: lenient(v) if callable(v) else v for k, v in store_page._env_filters(0).items()}
    return env.get_template("store.html").render(charts={}, **figures, **helpers)


def _facts(html: str) -> dict[str, str]:
    table = re.search(r'<section class="card" id="layout">(.*?)</section>', html, re.S).group(1)
    return {
        re.sub(r"<[^>]+>", "", dt).strip(): " ".join(re.sub(r"<[^>]+>", "", dd).split())
        for dt, dd in re.findall(r"<dt>(.*?)</dt><dd[^>]*>(.*?)</dd>", table, re.S)
    }


def test_the_stores_partitions_and_cassandras_are_told_apart():
    """As `statestore describe` says them (issue 46): the store's own partitions with their
    sub-partitions, and the size estimate's Cassandra partitions, never both bare "partitions"."""
    store = {"partitions": 4, "subpartitions": 8, "estimated_partitions": 139, "estimated_size": "2 MiB"}
    facts = _facts(_render(store=store))
    assert facts["store partitions"] == "4 x 8 sub-partitions"
    assert facts["estimated size"].startswith("2 MiB, 139 Cassandra partitions (Cassandra's estimate")
    assert "partitions" not in facts
    facts = _facts(_render(store={**store, "subpartitions": 1, "estimated_partitions": None}))
    assert facts["store partitions"] == "4" and facts["estimated size"].startswith("2 MiB (Cassandra's")
