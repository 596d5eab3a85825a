"""The point-get fast path (statestore.http.fast_get) on the real Cassandra: it answers warm
key-value gets without FastAPI's route, with exactly the route's answers, and hands everything
else to the route."""

from __future__ import annotations

import warnings
from urllib.parse import quote

import pytest
from cassandra import OperationTimedOut
from starlette.applications import Starlette
from starlette.routing import Mount

with warnings.catch_warnings():  # starlette 1.x asks for `httpx2`; the pinned set has httpx, which works
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

from statestore.conn import cassandra
from statestore.core import codecs
from statestore.core.model import Entry
from statestore.http import create_app
from statestore.http.fast_get import PointGetFastPath
from statestore.store.builder import StoreBuilder

WORDS = ["a", "x/y", "é", "日本語", "with space", "100%"]
BROKEN_ID = 5


@pytest.fixture(scope="module")
def stores(session, keyspace):
    words = StoreBuilder(session, "fast_words").with_keyspace(keyspace).partitioned_key_value_store(5).create()
    words.put_all([(w, i) for i, w in enumerate(WORDS)])
    ids = (
        StoreBuilder(session, "fast_ids")
        .with_keyspace(keyspace)
        .with_key_codec(codecs.LONG)
        .with_value_codec(codecs.JSON)
        .global_key_value_store()
        .create()
    )
    ids.put_all([(n, {"n": n}) for n in range(-3, 4)])
    # Written past the codecs, as a tool writing raw CQL could: bytes the store cannot decode.
    ids.table.write_entries(session, [Entry(codecs.LONG.encode(BROKEN_ID), b"\xffnot json", None, 0)], 1, None)
    prices = StoreBuilder(session, "fast_prices").with_keyspace(keyspace).global_versioned_store().create()
    prices.put("apple", 10, 1000)
    prices.put("apple", 12, 2000)
    prices.table.put_version(session, b"pear", b"\x01\x02\x03", 1000, None, 1000, None)
    prices.put("plum", 7, 1000)
    prices.delete("plum", 2000)  # deleted now: a 404, though it had a value as of 1500
    return words, ids, prices


def _counting_routes(app) -> list[str]:
    """The stores FastAPI's routes opened (catalog.store); the fast path only looks up warm handles."""
    catalog, opened = app.state.catalog, []
    original = catalog.store

    def store(name):
        opened.append(name)
        return original(name)

    catalog.store = store
    return opened


def _route_only(cassandra_config):
    app = create_app(cassandra_config)
    app.user_middleware = [m for m in app.user_middleware if m.cls is not PointGetFastPath]
    return app


PATHS = (
    [f"/stores/fast_words/keys/{quote(w, safe='/')}" for w in WORDS]
    + ["/stores/fast_words/keys/absent", "/stores/fast_ids/keys/-3", "/stores/fast_ids/keys/3"]
    + ["/stores/fast_ids/keys/seven", "/stores/fast_ids/keys/99999999999999999999", "/stores/fast_ids/keys/9"]
    + [f"/stores/fast_ids/keys/{BROKEN_ID}", "/stores/fast_prices/keys/pear"]
    + ["/stores/fast_prices/keys/apple", "/stores/fast_prices/keys/apple?as_of=1500", "/stores/fast_prices/keys/fig"]
    + ["/stores/fast_prices/keys/plum", "/stores/fast_prices/keys/plum?as_of=1500"]
    + ["/stores/fast_words/keys/a?as_of=5", "/stores/nosuch/keys/a", "/stores/No-Such/keys/a"]
)


def test_warm_gets_skip_the_route_and_answer_exactly_as_it_does(stores, cassandra_config):
    app = create_app(cassandra_config)
    opened = _counting_routes(app)
    with TestClient(app) as fast, TestClient(_route_only(cassandra_config)) as route:
        for path in PATHS:  # the first get of each store opens it through the route
            fast.get(path)
        opened.clear()
        for path in PATHS:
            want, got = route.get(path), fast.get(path)
            assert (got.status_code, got.json()) == (want.status_code, want.json()), path
            assert got.headers["content-type"] == "application/json", path
        # Gets without a query string never reached the route; the rest all did.
        assert sorted(set(opened)) == ["No-Such", "fast_prices", "fast_words", "nosuch"]
        assert opened.count("fast_words") == 1 and opened.count("fast_prices") == 2  # the as_of requests only


def test_values_and_errors_through_the_fast_path(stores, cassandra_config):
    app = create_app(cassandra_config)
    with TestClient(app) as client:
        client.get("/stores/fast_words/keys/a")
        client.get("/stores/fast_ids/keys/0")
        client.get("/stores/fast_prices/keys/apple")
        opened = _counting_routes(app)
        assert client.get("/stores/fast_words/keys/x/y").json() == {
            "key": "x/y",
            "value": 1,
            "valid_from": None,
            "valid_to": None,
        }
        assert client.get("/stores/fast_ids/keys/-3").json()["value"] == {"n": -3}
        absent = client.get("/stores/fast_words/keys/zzz")
        assert absent.status_code == 404 and absent.json() == {
            "status": 404,
            "error": "not found",
            "detail": "key 'zzz' is not in store 'fast_words'",
        }
        bad = client.get("/stores/fast_ids/keys/seven")
        assert bad.status_code == 400 and "'seven' is not a long key" in bad.json()["detail"]
        assert client.get("/stores/fast_prices/keys/apple").json() == {
            "key": "apple",
            "value": 12,
            "valid_from": 2000,
            "valid_to": None,
        }
        assert client.get("/stores/fast_prices/keys/plum").status_code == 404  # its current version: deleted
        assert opened == []

        # A read that times out answers 503 with the app's own message, not a 500.
        handle = app.state.catalog.warm("fast_words")

        async def timed_out(key):
            raise OperationTimedOut(errors={"127.0.0.1": "timed out"}, last_host="127.0.0.1")

        handle.get_async = timed_out
        answer = client.get("/stores/fast_words/keys/a")
        assert answer.status_code == 503 and answer.json()["detail"].startswith("Cassandra did not answer")


def test_the_fast_path_works_under_a_mount_prefix(stores, cassandra_config):
    api = create_app(cassandra_config)
    parent = Starlette(routes=[Mount("/statestore/api", app=api)])
    with TestClient(parent) as client:
        assert client.get("/statestore/api/stores/fast_words/keys/a").json()["value"] == 0
        opened = _counting_routes(api)
        assert client.get("/statestore/api/stores/fast_words/keys/%E6%97%A5%E6%9C%AC%E8%AA%9E").json()["value"] == 3
        assert client.get("/statestore/api/stores/fast_words/keys/absent").status_code == 404
        assert opened == []


def test_stored_bytes_the_codec_cannot_decode_answer_500_naming_the_store(stores, cassandra_config):
    with TestClient(create_app(cassandra_config)) as client:
        client.get("/stores/fast_ids/keys/0")  # warm: the next get takes the fast path
        for store, rest, codec in [
            ("fast_ids", f"keys/{BROKEN_ID}", "json"),
            ("fast_ids", "entries?limit=100", "json"),
            ("fast_prices", "keys/pear", "long"),
            ("fast_prices", "history/pear", "long"),
        ]:
            answer = client.get(f"/stores/{store}/{rest}")
            assert answer.status_code == 500, rest
            assert f"store '{store}' holds a value that its {codec} codec cannot decode" in answer.json()["detail"]
        assert client.get("/stores/fast_ids/keys/1").json()["value"] == {"n": 1}  # the rest still answers


def test_opening_a_store_prepares_its_point_get_so_the_event_loop_never_does(stores, cassandra_config, monkeypatch):
    app = create_app(cassandra_config)
    with TestClient(app) as client:
        monkeypatch.setattr(cassandra, "_prepared", {})  # as in a fresh server process
        for name in ("fast_words", "fast_prices"):
            assert client.get(f"/stores/{name}").status_code == 200  # opened by a route, in a worker thread
        session = app.state.catalog.session()

        def blocking_prepare(cql, *args, **kwargs):
            raise AssertionError(f"a statement was prepared on the event loop: {cql}")

        monkeypatch.setattr(session, "prepare", blocking_prepare)
        assert client.get("/stores/fast_words/keys/a").json()["value"] == 0
        assert client.get("/stores/fast_prices/keys/apple").json()["value"] == 12
