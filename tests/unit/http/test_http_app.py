"""The HTTP app without Cassandra: built with no I/O, its OpenAPI document, and its 503."""

from __future__ import annotations

import socket
import warnings

import pytest

with warnings.catch_warnings():  # starlette 1.x asks for `httpx2`; the pinned set has httpx, which works
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

from statestore.conn import cassandra
from statestore.core.config import CassandraConfig
from statestore.http import create_app


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_creating_the_app_does_no_io(monkeypatch):
    def no_io(*args, **kwargs):
        raise AssertionError("create_app connected to Cassandra")

    calls = []
    monkeypatch.setattr(cassandra, "session_for", no_io)
    create_app()
    create_app(lambda: calls.append("resolved") or CassandraConfig())
    create_app(CassandraConfig(port=1)).openapi()
    assert calls == []  # the settings function runs on the first request, not before


def test_openapi_document_declares_json_errors_instead_of_422():
    doc = create_app().openapi()
    assert set(doc["paths"]) == {
        "/stores",
        "/stores/{store}",
        "/stores/{store}/keys/{key}",
        "/stores/{store}/entries",
        "/stores/{store}/windows",
        "/stores/{store}/sessions",
        "/stores/{store}/history/{key}",
    }
    for path, operations in doc["paths"].items():
        responses = operations["get"]["responses"]
        assert "422" not in responses, path
        for status in ("400", "404", "503"):
            assert responses[status]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorBody"
            }
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    entries = {p["name"]: p for p in doc["paths"]["/stores/{store}/entries"]["get"]["parameters"]}
    assert set(entries) == {"store", "from", "to", "prefix", "reverse", "limit", "page_token"}
    assert entries["limit"]["schema"]["maximum"] == 10_000 and entries["limit"]["schema"]["minimum"] == 1


@pytest.mark.parametrize("path", ["/stores", "/stores/words", "/stores/words/keys/a", "/stores/words/entries"])
def test_unreachable_cassandra_is_a_503_naming_the_address(path):
    port = _closed_port()
    config = CassandraConfig(port=port, request_timeout_s=2.0)
    with TestClient(create_app(lambda: config)) as client:
        response = client.get(path)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == 503 and body["error"] == "unavailable"
    assert f"cannot reach Cassandra at 127.0.0.1:{port}" in body["detail"]


def test_bad_parameters_are_400_before_any_io():
    with TestClient(create_app(CassandraConfig(port=_closed_port()))) as client:
        for query in ("limit=0", "limit=10001", "limit=ten", "reverse=maybe"):
            response = client.get(f"/stores/words/entries?{query}")
            assert response.status_code == 400, query
            assert response.json()["error"] == "bad request"
        response = client.get("/stores/Not-A-Name")
        assert response.status_code == 400 and "invalid store name" in response.json()["detail"]
        assert client.get("/no/such/path").json() == {"status": 404, "error": "not found", "detail": "Not Found"}


def test_the_app_works_mounted_under_a_prefix():
    """As Airflow's API server mounts it: errors, routes and the OpenAPI document under the prefix."""
    from fastapi import FastAPI

    parent = FastAPI()
    parent.mount("/statestore", create_app(CassandraConfig(port=_closed_port(), request_timeout_s=2.0)))
    with TestClient(parent) as client:
        assert client.get("/statestore/openapi.json").json()["info"]["title"] == "statestore"
        response = client.get("/statestore/stores/Bad-Name")
        assert response.status_code == 400 and "invalid store name" in response.json()["detail"]
        assert client.get("/statestore/stores").status_code == 503


@pytest.mark.parametrize(
    ("path", "query", "root", "method", "expected"),
    [
        ("/stores/words/keys/a", b"", "", "GET", ("words", "a")),
        ("/stores/words/keys/x/y", b"", "", "GET", ("words", "x/y")),  # keys may hold slashes
        ("/api/stores/words/keys/é", b"", "/api", "GET", ("words", "é")),  # mounted under /api
        ("/stores/words/keys/a", b"as_of=5", "", "GET", None),  # a query string: FastAPI validates it
        ("/stores/words/keys/a", b"", "", "POST", None),
        ("/stores/words/keys/", b"", "", "GET", None),
        ("/stores//keys/a", b"", "", "GET", None),
        ("/stores/words/entries", b"", "", "GET", None),
        ("/stores/words/history/a", b"", "", "GET", None),
        ("/other/words/keys/a", b"", "", "GET", None),
    ],
)
def test_which_requests_the_point_get_fast_path_may_answer(path, query, root, method, expected):
    from statestore.http.fast_get import point_get_target

    scope = {"type": "http", "method": method, "path": path, "query_string": query, "root_path": root}
    assert point_get_target(scope) == expected


def test_the_fast_path_wraps_the_routes_and_the_request_timer_wraps_both():
    from statestore.http.fast_get import PointGetFastPath
    from statestore.http.metrics import RequestTimer

    # Outermost first: the timer sees the fast path's answers too.
    assert [m.cls for m in create_app().user_middleware] == [RequestTimer, PointGetFastPath]
