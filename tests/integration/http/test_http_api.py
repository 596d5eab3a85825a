"""The HTTP API as a client sees it: `statestore serve` as a real process on a free port, over the
real Cassandra, queried with httpx; its OpenAPI document checked with schemathesis."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from statestore.core import codecs
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.store.builder import StoreBuilder
from statestore.store.session import SessionKey
from tests.integration.conftest import free_port

PARTITIONS = 7
# Shared prefixes, non-ASCII text and a slash, so key order, prefixes and paths are all exercised.
WORDS = sorted(
    {f"{stem}{i}" for stem in ("a", "ab", "abc", "b", "é", "日本", "x/y") for i in range(40)} | {"a", "ab", "z", "zz"},
    key=lambda w: w.encode(),
)


# (key, value or None for a deletion, valid from epoch ms)
PRICE_CHANGES = [
    ("apple", 10, 1000),
    ("apple", 12, 2000),
    ("apple", None, 3000),
    ("apple", 15, 4000),
    ("pear", 5, 1500),
    ("plum", 7, 1000),
    ("plum", None, 2500),
] + [(f"fig{i:02d}", i, 100 * i) for i in range(1, 30)]
APPLE_HISTORY = [
    {"value": 10, "valid_from": 1000, "valid_to": 2000},
    {"value": 12, "valid_from": 2000, "valid_to": 3000},
    {"value": None, "valid_from": 3000, "valid_to": 4000},
    {"value": 15, "valid_from": 4000, "valid_to": None},
]


# (key, window start, count): windows over three days, so over several storage segments.
MINUTE_COUNTS = [
    (word, day * 86_400_000 + minute * 60_000, 1 + (day * 7 + minute) % 5)
    for word in ("heron", "mill", "reed", "é", "x/y")
    for day in (0, 1, 2)
    for minute in range(0, 30, 7)
]


# (key, session start, session end, count): sessions more than the gap apart, across segments.
VISITS = [
    (key, day * 86_400_000 + n * 600_000, day * 86_400_000 + n * 600_000 + 5 * n * 1000, n + 1)
    for key in ("ann", "bo", "日本")
    for day in (0, 1, 2)
    for n in range(4)
]


class Server:
    def __init__(self, *args: str, env: dict | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "statestore", "serve", "--port", str(self.port), "--no-access-log", *args]
        self.log = Path(os.environ.get("TMPDIR", "/tmp")) / f"statestore-serve-{self.port}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"serve exited: {self.log.read_text()}"
            try:
                if httpx.get(f"{self.url}/openapi.json", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise AssertionError(f"serve did not answer within 60 s: {self.log.read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def stores(session, keyspace):
    builder = StoreBuilder(session, "http_words").with_keyspace(keyspace)
    words = builder.partitioned_key_value_store(partitions=PARTITIONS).create()
    words.put_all([(w, i) for i, w in enumerate(WORDS)])
    ids = (
        StoreBuilder(session, "http_ids")
        .with_keyspace(keyspace)
        .with_key_codec(codecs.LONG)
        .with_value_codec(codecs.JSON)
        .global_key_value_store()
        .create()
    )
    ids.put_all([(n, {"n": n, "sq": n * n}) for n in range(-20, 83)])
    prices = (
        StoreBuilder(session, "http_prices").with_keyspace(keyspace).partitioned_versioned_store(partitions=3).create()
    )
    for key, value, at in PRICE_CHANGES:
        prices.put(key, value, at)
    events = (
        StoreBuilder(session, "http_events")
        .with_keyspace(keyspace)
        .with_key_codec(codecs.LONG)
        .with_value_codec(codecs.JSON)
        .global_versioned_store()
        .create()
    )
    for n in range(12):
        events.put(n, {"v": 1}, 1000)
        events.put(n, {"v": 2}, 2000 + n)
    events.put(5, None, 3000)  # deleted now: not among the current entries
    docs = (
        StoreBuilder(session, "http_docs")
        .with_keyspace(keyspace)
        .with_key_codec(codecs.JSON)
        .partitioned_key_value_store(partitions=3)
        .create()
    )
    docs.put({"id": [1, 2]}, 3)
    minutes = (
        StoreBuilder(session, "http_minutes")
        .with_keyspace(keyspace)
        .partitioned_window_store(WindowSpec(60_000), partitions=3)
        .create()
    )
    for key, start, count in MINUTE_COUNTS:
        minutes.put(key, count, start)
    visits = (
        StoreBuilder(session, "http_visits")
        .with_keyspace(keyspace)
        .partitioned_session_store(SessionSpec(60_000), partitions=3)
        .create()
    )
    for key, start, end, count in VISITS:
        visits.put(SessionKey(key, start, end), count)
    return {"words": words, "ids": ids, "prices": prices, "events": events, "minutes": minutes, "visits": visits}


@pytest.fixture(scope="module")
def api(stores, keyspace):
    server = Server("--keyspace", keyspace)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield client
    finally:
        server.stop()


def _pages(api, store: str, limit: int, **params) -> list[dict]:
    pages, token = [], None
    while True:
        query = {**params, "limit": limit, **({"page_token": token} if token else {})}
        response = api.get(f"/stores/{store}/entries", params=query)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        token = pages[-1]["next_page_token"]
        if token is None:
            return pages


def _keys(pages) -> list:
    return [e["key"] for page in pages for e in page["entries"]]


def test_list_and_describe(api, keyspace):
    listed = api.get("/stores").json()
    assert listed["keyspace"] == keyspace
    by_name = {s["name"]: s for s in listed["stores"]}
    assert by_name["http_words"] == {
        "name": "http_words",
        "type": "partitioned-kv",
        "table": "http_words_store",
        "partitions": PARTITIONS,
        "subpartitions": 1,
        "key_codec": "string",
        "value_codec": "long",
    }
    described = api.get("/stores/http_ids").json()
    assert (described["type"], described["key_codec"], described["value_codec"]) == ("global-kv", "long", "json")
    assert described["supports"] == {
        "range": False,
        "prefix": False,
        "reverse": False,
        "history": False,
        "windows": False,
        "sessions": False,
        "entries_order": "token",
    }
    assert described["progress"]["last_batch_id"] is None
    assert api.get("/stores/http_words").json()["supports"]["entries_order"] == "key"


def test_get_keys_of_every_kind(api):
    for i, word in enumerate(WORDS):
        if i % 23 == 0 or "/" in word or not word.isascii():
            response = api.get(f"/stores/http_words/keys/{quote(word, safe='')}")
            assert response.status_code == 200, word
            assert response.json() == {"key": word, "value": i, "valid_from": None, "valid_to": None}
    assert api.get("/stores/http_ids/keys/-7").json()["value"] == {"n": -7, "sq": 49}


def test_paging_across_partitions_gives_the_sorted_store_without_gaps_or_duplicates(api):
    for limit in (1, 13, 100, 10_000):
        pages = _pages(api, "http_words", limit)
        assert _keys(pages) == WORDS
        assert all(len(p["entries"]) == limit for p in pages[:-1]) and len(pages[-1]["entries"]) <= limit
        assert {p["order"] for p in pages} == {"key"}
    values = [e["value"] for page in _pages(api, "http_words", 37) for e in page["entries"]]
    assert values == list(range(len(WORDS)))
    assert _keys(_pages(api, "http_words", 9, reverse="true")) == WORDS[::-1]


def test_ranges_and_prefixes_page_too(api):
    def between(low, high):
        return [w for w in WORDS if low.encode() <= w.encode() <= high.encode()]

    assert _keys(_pages(api, "http_words", 4, **{"from": "ab", "to": "b3"})) == between("ab", "b3")
    assert (
        _keys(_pages(api, "http_words", 4, **{"from": "ab", "to": "b3", "reverse": "true"}))
        == between("ab", "b3")[::-1]
    )
    assert _keys(_pages(api, "http_words", 6, **{"from": "x/y1"})) == between("x/y1", "\U0010ffff")
    assert _keys(_pages(api, "http_words", 6, to="a1")) == between("", "a1")
    assert _keys(_pages(api, "http_words", 5, prefix="ab")) == [w for w in WORDS if w.startswith("ab")]
    assert (
        _keys(_pages(api, "http_words", 5, prefix="日本", reverse="true"))
        == [w for w in WORDS if w.startswith("日本")][::-1]
    )
    assert _keys(_pages(api, "http_words", 5, **{"from": "b", "to": "a"})) == []  # from above to: empty


def test_a_global_store_pages_in_token_order_covering_every_entry_once(api, stores):
    pages = _pages(api, "http_ids", 10)
    keys = _keys(pages)
    assert sorted(keys) == list(range(-20, 83)) and len(keys) == len(set(keys))
    assert {p["order"] for p in pages} == {"token"}
    assert keys == _keys(_pages(api, "http_ids", 1000)) != sorted(keys)  # stable, and not key order
    assert all(e["value"] == {"n": e["key"], "sq": e["key"] ** 2} for p in pages for e in p["entries"])


def test_bad_parameters_are_400_with_the_reason(api):
    def bad(path, params=None, expected=""):
        response = api.get(path, params=params)
        assert response.status_code == 400, (path, params, response.text)
        body = response.json()
        assert body["status"] == 400 and body["error"] == "bad request" and expected in body["detail"]

    bad("/stores/http_ids/keys/seven", expected="'seven' is not a long key: write a decimal integer")
    bad("/stores/http_ids/keys/99999999999999999999", expected="does not fit a signed 64-bit long")
    bad("/stores/http_words/entries", {"limit": 0}, "limit")
    bad("/stores/http_words/entries", {"limit": 10_001}, "limit")
    bad("/stores/http_words/entries", {"page_token": "garbage"}, "not one this API issued")
    token = api.get("/stores/http_words/entries", params={"limit": 2, "prefix": "a"}).json()["next_page_token"]
    bad("/stores/http_words/entries", {"limit": 2, "page_token": token}, "belongs to another query")
    bad("/stores/http_ids/entries", {"page_token": token}, "belongs to another query")
    bad("/stores/http_words/entries", {"prefix": "a", "from": "b"}, "either prefix or from/to")
    bad("/stores/http_ids/entries", {"from": "1", "to": "5"}, "is a global-kv store: its keys are spread by hash")
    bad("/stores/http_ids/entries", {"prefix": "1"}, "range and prefix scans would read the whole table")
    bad("/stores/http_ids/entries", {"reverse": "true"}, "token (hash) order, which has no reverse")
    bad("/stores/http_words/keys/a", {"as_of": 5}, "keeps only each key's latest value, so it has no as-of reads")
    bad("/stores/http_words/history/a", None, "has no history")
    bad("/stores/No-Such", None, "invalid store name")
    bad("/stores/http_docs/keys/" + "[" * 3_000 + "]" * 3_000, None, "nested deeper than")
    assert api.get("/stores/http_docs/keys/" + '{"id":[1,2]}').json()["value"] == 3


def test_unknown_stores_and_keys_are_404(api, keyspace):
    for path in ("/stores/nosuch", "/stores/nosuch/keys/a", "/stores/nosuch/entries", "/stores/nosuch/history/a"):
        response = api.get(path)
        assert response.status_code == 404, path
        assert response.json()["detail"] == (
            f"no store 'nosuch' in keyspace '{keyspace}' (see `statestore stores` for the list)"
        )
    response = api.get("/stores/http_words/keys/absent")
    assert response.status_code == 404 and response.json()["detail"] == "key 'absent' is not in store 'http_words'"
    assert api.get("/stores/http_ids/keys/1000").status_code == 404


def _window_pages(api, limit: int, **params) -> list[dict]:
    pages, token = [], None
    while True:
        query = {**params, "limit": limit, **({"page_token": token} if token else {})}
        response = api.get("/stores/http_minutes/windows", params=query)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        token = pages[-1]["next_page_token"]
        if token is None:
            return pages


def test_window_stores_page_their_windows_by_key_then_start(api):
    described = api.get("/stores/http_minutes").json()
    assert described["type"] == "partitioned-window" and described["supports"]["windows"] is True
    expected = sorted(((k, s, s + 60_000, v) for k, s, v in MINUTE_COUNTS), key=lambda w: (w[0].encode(), w[1]))
    pages = _window_pages(api, 7)
    got = [(w["key"], w["window_start"], w["window_end"], w["value"]) for p in pages for w in p["windows"]]
    assert got == expected
    assert len(pages) == -(-len(expected) // 7)
    # One key, a time span: the span bounds the window start, inclusive at both ends.
    day1 = 86_400_000
    one = _window_pages(api, 2, key="x/y", **{"from": day1, "to": day1 + 21 * 60_000})
    assert [(w["key"], w["window_start"]) for p in one for w in p["windows"]] == [
        ("x/y", day1 + m * 60_000) for m in (0, 7, 14, 21)
    ]
    # A token belongs to its query; a key-value store has no windows.
    token = _window_pages(api, 7)[0]["next_page_token"]
    stray = api.get("/stores/http_minutes/windows", params={"key": "mill", "page_token": token})
    assert stray.status_code == 400 and "another query" in stray.json()["detail"]
    wrong = api.get("/stores/http_words/windows")
    assert wrong.status_code == 400 and "no windows" in wrong.json()["detail"]
    assert api.get("/stores/http_minutes/entries").status_code == 400


def test_session_stores_page_their_sessions_by_key_then_end(api):
    described = api.get("/stores/http_visits").json()
    assert described["type"] == "partitioned-session" and described["supports"]["sessions"] is True
    expected = sorted(VISITS, key=lambda v: (v[0].encode(), v[2], v[1]))
    pages, token = [], None
    while True:
        query = {"limit": 5, **({"page_token": token} if token else {})}
        response = api.get("/stores/http_visits/sessions", params=query)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        token = pages[-1]["next_page_token"]
        if token is None:
            break
    got = [(s["key"], s["session_start"], s["session_end"], s["value"]) for p in pages for s in p["sessions"]]
    assert got == expected and len(pages) == -(-len(expected) // 5)
    one = api.get("/stores/http_visits/sessions", params={"key": "bo"}).json()["sessions"]
    assert [(s["session_start"], s["session_end"]) for s in one] == [(a, b) for k, a, b, _ in expected if k == "bo"]
    assert api.get("/stores/http_minutes/sessions").status_code == 400
    assert api.get("/stores/http_visits/windows").status_code == 400


def test_versioned_get_as_of_and_history(api):
    def get(key, **params):
        return api.get(f"/stores/http_prices/keys/{key}", params=params)

    assert get("apple").json() == {"key": "apple", "value": 15, "valid_from": 4000, "valid_to": None}
    assert get("apple", as_of=1999).json() == {"key": "apple", "value": 10, "valid_from": 1000, "valid_to": 2000}
    assert get("apple", as_of=2000).json()["value"] == 12
    for as_of in (999, 3000, 3999):  # before the first version, and while deleted
        response = get("apple", as_of=as_of)
        assert response.status_code == 404 and response.json()["detail"] == (
            f"key 'apple' is not in store 'http_prices' as of {as_of} ms"
        )
    assert get("plum").status_code == 404 and get("plum", as_of=2000).json()["value"] == 7

    def history(key, **params):
        response = api.get(f"/stores/http_prices/history/{key}", params=params)
        assert response.status_code == 200, response.text
        return response.json()

    assert history("apple") == {"key": "apple", "versions": APPLE_HISTORY, "next_from": None}
    assert history("apple", **{"from": 2500, "to": 4000})["versions"] == APPLE_HISTORY[1:3]
    # A long history pages with next_from: the pages join up without gaps or repeats.
    first = history("apple", limit=3)
    assert first["versions"] == APPLE_HISTORY[:3] and first["next_from"] == 4000
    assert history("apple", **{"from": first["next_from"], "limit": 3})["versions"] == APPLE_HISTORY[3:]
    assert history("absent") == {"key": "absent", "versions": [], "next_from": None}
    assert api.get("/stores/http_prices/keys/apple", params={"as_of": -1}).status_code == 400


def test_versioned_stores_scan_current_values(api):
    current = sorted([("apple", 15), ("pear", 5)] + [(f"fig{i:02d}", i) for i in range(1, 30)])
    pages = _pages(api, "http_prices", 4)
    assert [(e["key"], e["value"]) for p in pages for e in p["entries"]] == current  # plum is deleted
    assert _keys(_pages(api, "http_prices", 5, prefix="fig1", reverse="true")) == [f"fig{i}" for i in range(19, 9, -1)]
    described = api.get("/stores/http_prices").json()
    assert described["type"] == "partitioned-versioned" and described["supports"]["history"] is True

    events = _pages(api, "http_events", 5)
    assert sorted(e["key"] for p in events for e in p["entries"]) == [n for n in range(12) if n != 5]
    assert all(e["value"] == {"v": 2} for p in events for e in p["entries"])
    assert {p["order"] for p in events} == {"token"}
    assert api.get("/stores/http_events/keys/3", params={"as_of": 1500}).json()["value"] == {"v": 1}
    response = api.get("/stores/http_events/entries", params={"from": "1"})
    assert response.status_code == 400 and "is a global-versioned store" in response.json()["detail"]


def test_unreachable_cassandra_is_503(keyspace):
    server = Server("--keyspace", keyspace, "--cassandra-port", str(free_port()), "--request-timeout", "2")
    try:
        response = httpx.get(f"{server.url}/stores/http_words/keys/a", timeout=30)
    finally:
        server.stop()
    assert response.status_code == 503
    assert "cannot reach Cassandra at 127.0.0.1" in response.json()["detail"]


def test_the_read_cache_serves_reads_up_to_its_ttl_behind_the_store(stores, keyspace):
    # A TTL long enough that a stalled machine cannot expire the entry before the second read.
    server = Server("--keyspace", keyspace, "--cache-entries", "100", "--cache-ttl", "8")
    try:
        url = f"{server.url}/stores/http_words/keys/zz"
        before = httpx.get(url).json()["value"]
        stores["words"].put("zz", before + 1000)  # written by another process, as the stream would
        assert httpx.get(url).json()["value"] == before  # cached: stale by design
        time.sleep(8.5)
        assert httpx.get(url).json()["value"] == before + 1000
    finally:
        stores["words"].put("zz", before)
        server.stop()


def test_openapi_document_holds_against_the_server(api):
    """schemathesis: generated requests (valid and invalid) to every operation, against real and unknown
    stores; no answer is a server error, and every answer is one the OpenAPI document declares."""
    schema = schemathesis.openapi.from_url(f"{api.base_url}/openapi.json")
    strategies = []
    for result in schema.get_all_operations():
        operation = result.ok()
        # Real stores too (fixed store names), so generated keys, ranges and tokens reach Cassandra.
        names = ("http_words", "http_ids", "http_prices", "http_events", "http_minutes", "http_visits")
        real = [{"store": name} for name in names]
        fixed = [*real, None] if "{store}" in operation.path else [None]
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategies += [operation.as_strategy(mode, path_parameters=params) for params in fixed]
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
    seen = collections.Counter()

    @settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.one_of(strategies))
    def check(case):
        response = case.call_and_validate(checks=checks)
        seen[response.status_code] += 1

    check()
    assert {200, 400, 404} <= set(seen), seen  # the generated requests reached every kind of answer
