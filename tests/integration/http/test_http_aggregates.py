"""The HTTP API over an aggregate store on the real stack: a get (by the route and by the fast
path once the store is warm) and a page of entries carry the measures as one JSON object, and
the store's description names its measures."""

from __future__ import annotations

import warnings

import pytest

from statestore.http import create_app
from tests.integration import aggregate_stores
from tests.integration.aggregate_stores import BIG

with warnings.catch_warnings():  # starlette 1.x asks for `httpx2`; the pinned set has httpx, which works
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient


@pytest.fixture(scope="module")
def stores(session, keyspace):
    partitioned = aggregate_stores.fill(session, keyspace, "http_orders")[1]
    aggregate_stores.fill(session, keyspace, "http_orders_global", partitions=None)
    return partitioned


def test_gets_and_pages_carry_the_measures_as_an_object(cassandra_config, stores):
    with TestClient(create_app(cassandra_config)) as client:
        for _ in range(2):  # the route, then the fast path on the warm store
            answer = client.get("/stores/http_orders/keys/alice")
            assert answer.status_code == 200
            assert answer.json() == {"key": "alice", "value": stores["alice"], "valid_from": None, "valid_to": None}
        assert f'"units":{BIG}' in answer.text  # exact, past a long
        assert list(answer.json()["value"]) == ["n", "total", "units", "lo", "hi", "city", "users"]

        page = client.get("/stores/http_orders/entries", params={"from": "b", "limit": 2}).json()
        assert page["entries"] == [{"key": k, "value": stores[k]} for k in ("bob", "carol")]
        every = client.get("/stores/http_orders_global/entries").json()["entries"]
        assert sorted(every, key=lambda e: e["key"]) == [{"key": k, "value": stores[k]} for k in sorted(stores)]

        described = client.get("/stores/http_orders").json()
        assert described["value_codec"].startswith("aggregate:n=count(), total=sum(amount)")
        assert described["measures"][:2] == [
            {"name": "n", "aggregation": "count", "field": None},
            {"name": "total", "aggregation": "sum", "field": "amount"},
        ]
        assert client.get("/stores/http_orders_global").json()["measures"][-1]["aggregation"] == "distinct"


def test_window_pages_carry_each_windows_measures_as_an_object(session, keyspace, cassandra_config):
    from tests.integration.aggregate_stores import MINUTE

    windows = aggregate_stores.fill_windows(session, keyspace, "http_window_orders")[1]
    with TestClient(create_app(cassandra_config)) as client:
        page = client.get("/stores/http_window_orders/windows", params={"limit": 4}).json()
        first = [(k, s) for k, s in sorted(windows)][:4]
        assert page["windows"] == [
            {"key": k, "window_start": s, "window_end": s + MINUTE, "value": windows[(k, s)]} for k, s in first
        ]
        rest = client.get("/stores/http_window_orders/windows", params={"page_token": page["next_page_token"]})
        assert [(w["key"], w["window_start"]) for w in rest.json()["windows"]] == sorted(windows)[4:]
        answer = client.get("/stores/http_window_orders/windows", params={"key": "alice"})
        assert f'"units":{BIG}' in answer.text  # exact, past a long
        assert [w["value"] for w in answer.json()["windows"]] == [
            v for (k, _), v in sorted(windows.items()) if k == "alice"
        ]
        assert list(answer.json()["windows"][0]["value"]) == ["n", "total", "units", "lo", "hi", "city", "users"]

        described = client.get("/stores/http_window_orders").json()
        assert described["supports"]["windows"] and described["measures"][-1] == {
            "name": "users",
            "aggregation": "distinct",
            "field": "user",
        }


def test_session_pages_carry_each_sessions_measures_as_an_object(session, keyspace, cassandra_config):
    sessions = aggregate_stores.fill_sessions(session, keyspace, "http_session_orders")[1]
    with TestClient(create_app(cassandra_config)) as client:
        page = client.get("/stores/http_session_orders/sessions", params={"limit": 3}).json()
        ordered = sorted(sessions, key=lambda s: (s[0], s[2]))  # by key, then session end
        assert page["sessions"] == [
            {"key": k, "session_start": s, "session_end": e, "value": sessions[(k, s, e)]} for k, s, e in ordered[:3]
        ]
        rest = client.get("/stores/http_session_orders/sessions", params={"page_token": page["next_page_token"]})
        assert [(w["key"], w["session_start"], w["session_end"]) for w in rest.json()["sessions"]] == ordered[3:]
        answer = client.get("/stores/http_session_orders/sessions", params={"key": "alice"})
        assert f'"units":{BIG}' in answer.text  # exact, past a long
        assert [w["value"] for w in answer.json()["sessions"]] == [sessions[s] for s in ordered if s[0] == "alice"]
        assert list(answer.json()["sessions"][0]["value"]) == ["n", "total", "units", "lo", "hi", "city", "users"]

        described = client.get("/stores/http_session_orders").json()
        assert described["supports"]["sessions"] and described["measures"][-1] == {
            "name": "users",
            "aggregation": "distinct",
            "field": "user",
        }
