"""The store page's addresses without Cassandra: a store's earlier address (?store=) leads to its
own page before anything is read."""

from __future__ import annotations

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
from fastapi.testclient import TestClient
from statestore_airflow import store_page


def _unreachable():
    raise AssertionError("the Cassandra settings were asked for, but this request needs none")


def test_the_earlier_address_of_a_store_leads_to_its_page(tmp_path):
    client = TestClient(store_page.create_store_app(_unreachable, lambda: tmp_path, authenticate=False))
    answer = client.get("/?store=page_words", follow_redirects=False)
    assert (answer.status_code, answer.headers["location"]) == (307, "stores/page_words")
    answer = client.get("/?store=a/../b", follow_redirects=False)
    assert answer.headers["location"] == "stores/a%2F..%2Fb"  # one path segment, whatever it holds
