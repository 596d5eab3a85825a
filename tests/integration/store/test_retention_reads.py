"""A store's retention at read time, on the real Cassandra: an entry dated before stream time -
retention is absent to the library (get, get_many, scans, exact count, through the read cache
too), to the CLI (get, range, dump, set-retention) and to the HTTP API (the fast get, the
route's get, the entries listing) while it is still in the table, before any expire job; an
entry without a time, or a store without a stream time, hides nothing."""

from __future__ import annotations

import asyncio
import csv
import io
import warnings

import pytest

with warnings.catch_warnings():  # starlette 1.x asks for `httpx2`; the pinned set has httpx, which works
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

from statestore.cli.main import main
from statestore.core.codecs import encode_long, encode_text
from statestore.core.model import Entry
from statestore.http import create_app
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.book.registry import BatchPosition
from statestore.store.builder import open_store
from statestore.store.retention import set_retention
from statestore.store.tables import table_for

HOUR = 3_600_000
NOW = 1_767_225_600_000  # the stream time the tests give their stores
KV_TYPES = ("partitioned-kv", "global-kv")


def _seed(session, keyspace, name: str, store_type: str) -> None:
    """A store with a 1 h retention: `old` (2 h before NOW), `fresh` (10 min before), `undated`
    (no time) and `late` (at the cutoff exactly, so kept), and no stream time yet."""
    spec = admin.create_store(session, keyspace, name, store_type, 3, retention_ms=HOUR)
    assert spec.retention_ms == HOUR
    entries = [
        Entry(encode_text("old"), encode_long(1), 0, NOW - 2 * HOUR),
        Entry(encode_text("fresh"), encode_long(2), 0, NOW - 600_000),
        Entry(encode_text("undated"), encode_long(3), 0, None),
        Entry(encode_text("late"), encode_long(4), 0, NOW - HOUR),
    ]
    table_for(spec).write_entries(session, entries, 4, None)


def _give_stream_time(session, keyspace, name: str, stream_time_ms: int) -> None:
    spec = registry.lookup(session, keyspace, name)
    registry.record_batch(session, spec, BatchPosition(batch_id=0, write_ts=1, start=None, end=None), stream_time_ms)


LIVE = {"fresh": 2, "undated": 3, "late": 4}


@pytest.mark.parametrize("store_type", KV_TYPES)
def test_the_library_hides_entries_past_the_retention(session, keyspace, store_type):
    name = f"ret_lib_{store_type[0]}"
    _seed(session, keyspace, name, store_type)
    store = open_store(session, keyspace, name)
    assert store.get("old") == 1  # no stream time yet: nothing is hidden
    _give_stream_time(session, keyspace, name, NOW)

    assert store.get("old") is None
    assert {k: store.get(k) for k in LIVE} == LIVE
    assert asyncio.run(store.get_many_async(["old", "fresh", "undated"])) == [None, 2, 3]
    assert asyncio.run(store.get_async("old")) is None
    assert dict(store.all()) == LIVE
    assert open_store(session, keyspace, name, count_all=True).approximate_num_entries() == len(LIVE)
    if store_type == "partitioned-kv":
        assert dict(store.range("a", "z")) == LIVE
        assert list(store.prefix_scan("ol")) == []
    # Still in the table: hidden at read, not deleted (the expire job reclaims it).
    assert "old" in {e.key.decode() for e in store.table.scan_unordered(session)}

    cached = open_store(session, keyspace, name, cache=admin_cache())
    assert cached.get("old") is None and cached.get("old") is None  # the second from the cache
    assert cached.get("fresh") == 2

    # A retention taken away shows the entry again, to a reader that opens the store afterwards.
    set_retention(session, keyspace, name, None)
    assert open_store(session, keyspace, name).get("old") == 1


def admin_cache():
    from statestore.store.cache import CacheOptions

    return CacheOptions(max_entries=100, ttl_s=30)


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_hides_entries_past_the_retention_and_sets_it(capsys, session, keyspace):
    name = "ret_cli"
    _seed(session, keyspace, name, "partitioned-kv")
    _give_stream_time(session, keyspace, name, NOW)
    ks = ("--keyspace", keyspace)

    assert _cli(capsys, "get", name, "old", *ks)[0] == 3  # not found
    assert _cli(capsys, "get", name, "fresh", *ks)[:2] == (0, "2\n")
    code, out, _ = _cli(capsys, "dump", name, "--format", "csv", *ks)
    assert code == 0 and dict(csv.reader(io.StringIO(out))) == {"key": "value", **{k: str(v) for k, v in LIVE.items()}}
    code, out, _ = _cli(capsys, "range", name, "--from", "a", "--to", "z", "--format", "csv", *ks)
    assert "old" not in out and "fresh" in out

    # set-retention: a longer one shows it again, `none` removes it, a window store refuses one.
    code, out, _ = _cli(capsys, "set-retention", name, "3h", *ks)
    assert code == 0 and "retention 3h" in out
    assert _cli(capsys, "get", name, "old", *ks)[:2] == (0, "1\n")
    assert _cli(capsys, "set-retention", name, "none", *ks)[0] == 0
    assert registry.lookup(session, keyspace, name).retention_ms is None
    code, _, err = _cli(capsys, "set-retention", name, "soon", *ks)
    assert code == 2 and "retention 'soon' is not a duration" in err

    code, out, _ = _cli(capsys, "create-store", "ret_cli_new", "--retention", "7d", "--partitions", "2", *ks)
    assert code == 0 and "retention 7d" in out
    assert registry.lookup(session, keyspace, "ret_cli_new").retention_ms == 7 * 24 * HOUR


def test_the_http_api_hides_entries_past_the_retention(session, keyspace, cassandra_config):
    for name, store_type in (("ret_http", "partitioned-kv"), ("ret_http_g", "global-kv")):
        _seed(session, keyspace, name, store_type)
        _give_stream_time(session, keyspace, name, NOW)
    app = create_app(cassandra_config)
    with TestClient(app) as client:
        for name in ("ret_http", "ret_http_g"):
            # The first get opens the store through the route; the second is the fast path's.
            for _ in range(2):
                assert client.get(f"/stores/{name}/keys/old").status_code == 404
                assert client.get(f"/stores/{name}/keys/fresh").json()["value"] == 2
            assert app.state.catalog.warm(name) is not None  # the fast path answered the second round
            page = client.get(f"/stores/{name}/entries", params={"limit": 2}).json()
            keys = [e["key"] for e in page["entries"]]
            while page["next_page_token"]:
                page = client.get(
                    f"/stores/{name}/entries", params={"limit": 2, "page_token": page["next_page_token"]}
                ).json()
                keys += [e["key"] for e in page["entries"]]
            assert sorted(keys) == sorted(LIVE)
            assert client.get(f"/stores/{name}").json()["retention_ms"] == HOUR


@pytest.mark.parametrize("store_type", ("partitioned-versioned", "global-versioned"))
def test_a_versioned_stores_current_value_past_the_retention_is_absent(session, keyspace, store_type):
    name = f"ret_ver_{store_type[0]}"
    admin.create_store(session, keyspace, name, store_type, 2, retention_ms=HOUR)
    store = open_store(session, keyspace, name)
    store.put("old", 1, NOW - 2 * HOUR)
    store.put("fresh", 2, NOW - 600_000)
    _give_stream_time(session, keyspace, name, NOW)

    assert store.get("old") is None and store.get("fresh").value == 2
    assert dict(store.all()) == {"fresh": 2}
    # History is the record of what was: versions past the retention stay readable there.
    assert [v.value for v in store.history("old")] == [1]
