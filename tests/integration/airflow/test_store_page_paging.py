"""The store page lists a keyspace a page at a time: every store on exactly one page, in name
order, each page no longer than its size, with links to the pages beside it; a page past the
last shows the last. In process against the test keyspace (the page alone, no Airflow login)."""

from __future__ import annotations

import re

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
from fastapi.testclient import TestClient
from statestore_airflow import store_page

from statestore.store import admin
from statestore.store.builder import StoreBuilder

ROW = re.compile(r'<tr data-store="([^"]+)">')


def test_the_store_list_pages_through_every_store_once(session, keyspace, cassandra_config, tmp_path):
    for name in ("paging_a", "paging_b", "paging_c"):
        StoreBuilder(session, name).with_keyspace(keyspace).partitioned_key_value_store(2).create()
    names = [listing.spec.name for listing in admin.list_stores(session, keyspace)]
    pages = -(-len(names) // 2)
    client = TestClient(
        store_page.create_store_app(lambda: cassandra_config, lambda: tmp_path, authenticate=False, per_page=2)
    )

    seen = []
    for page in range(1, pages + 1):
        html = client.get(f"/?page={page}").text
        rows = ROW.findall(html)
        assert 1 <= len(rows) <= 2, (page, rows)
        seen += rows
        assert f"page {page} of {pages}" in html
        assert ('id="previous" href="?page=' + str(page - 1)) in html if page > 1 else 'id="previous"' not in html
        assert ('id="next" href="?page=' + str(page + 1)) in html if page < pages else 'id="next"' not in html
    assert seen == names  # each store once, in name order

    assert ROW.findall(client.get(f"/?page={pages + 5}").text) == names[(pages - 1) * 2 :]
    assert client.get("/?page=0").status_code == 422  # FastAPI's answer to a parameter out of range
