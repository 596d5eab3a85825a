"""An aggregate store's page: its top keys with a column per measure, ranked by the first count
measure or the one `?by=` names, and the key lookup showing each measure. In process against
the test keyspace (the page alone, no Airflow login)."""

from __future__ import annotations

import html as markup
import re

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
import pytest
from fastapi.testclient import TestClient
from statestore_airflow import store_page

from tests.integration import aggregate_stores

TOP = re.compile(r'<table id="top-keys">(.*?)</table>', re.S)


def _cells(html: str) -> list[list[str]]:
    """Each row's cells as text."""
    return [
        [
            markup.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", tr, re.S)
        ]
        for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)
    ]


@pytest.fixture(scope="module")
def client(session, keyspace, cassandra_config, tmp_path_factory):
    aggregate_stores.fill(session, keyspace, "page_orders")
    report_dir = tmp_path_factory.mktemp("reports")
    return TestClient(store_page.create_store_app(lambda: cassandra_config, lambda: report_dir, authenticate=False))


def test_the_top_keys_show_each_measure_ranked_by_count_or_the_one_asked(client):
    html = client.get("/stores/page_orders").text
    rows = _cells(TOP.search(html).group(1))
    assert rows[0] == ["#", "key", "n", "total", "units", "lo", "hi", "city", "users"]
    assert [r[1] for r in rows[1:]] == ["bob", "dave", "alice", "carol"]  # by n, ties by key
    assert rows[2][:7] == ["2", "dave", "9", "0.0", "0", "-", "-"]  # no min, max yet
    assert rows[3][2:8] == ["5", "12.5", f"{aggregate_stores.BIG:,}", "0.5", "7.0", "Zürich"]
    assert 'id="top-by"' in html and "ranked by n" in html

    rows = _cells(TOP.search(client.get("/stores/page_orders?by=hi&top=2").text).group(1))
    assert [r[1] for r in rows[1:]] == ["carol", "alice"]
    html = client.get("/stores/page_orders?by=city").text
    assert TOP.search(html) is None and "not a number to rank by" in re.search(r'id="top-note">(.*?)<', html).group(1)


def test_the_key_lookup_shows_each_measure(client):
    html = client.get("/stores/page_orders?key=bob").text
    shown = re.search(r'<table id="lookup-measures">(.*?)</table>', html, re.S).group(1)
    assert _cells(shown) == [
        ["n", "total", "units", "lo", "hi", "city", "users"],
        ["9", "-3.25", "4", "-5.0", "1.75", '{"id":7}', "1.0"],
    ]


WINDOWS = re.compile(r'<table id="latest-windows">(.*?)</table>', re.S)


def test_a_window_aggregate_stores_latest_windows_show_each_measure(client, session, keyspace):
    aggregate_stores.fill_windows(session, keyspace, "page_window_orders")
    html = client.get("/stores/page_window_orders").text
    rows = _cells(WINDOWS.search(html).group(1))
    header = ["window start (UTC)", "window end (UTC)", "#", "key", "n", "total", "units", "lo", "hi", "city", "users"]
    assert rows[0] == header
    assert [(r[2], r[3]) for r in rows[1:]] == [
        ("1", "bob"),
        ("2", "alice"),
        ("1", "carol"),
        ("2", "alice"),
        ("1", "bob"),
    ]
    assert rows[2][4:10] == ["5", "12.5", f"{aggregate_stores.BIG:,}", "0.5", "7.0", "Zürich"]  # alice, the newest
    assert rows[3][4:9] == ["9", "0.0", "0", "-", "-"]  # carol: no min, max yet
    assert "ranked by n" in html

    rows = _cells(WINDOWS.search(client.get("/stores/page_window_orders?by=hi&top=1").text).group(1))
    assert [r[3] for r in rows[1:]] == ["alice", "alice", "bob"]
    html = client.get("/stores/page_window_orders?by=city").text
    assert WINDOWS.search(html) is None and "not a number to rank by" in re.search(r'id="top-note">(.*?)<', html).group(
        1
    )


SESSIONS = re.compile(r'<table id="latest-sessions">(.*?)</table>', re.S)


def test_a_session_aggregate_stores_latest_sessions_show_each_measure(client, session, keyspace):
    aggregate_stores.fill_sessions(session, keyspace, "page_session_orders")
    html = client.get("/stores/page_session_orders").text
    rows = _cells(SESSIONS.search(html).group(1))
    header = ["#", "key", "session start (UTC)", "session end (UTC)", "n", "total", "units", "lo", "hi", "city"]
    assert rows[0] == [*header, "users"]
    assert [(r[0], r[1]) for r in rows[1:]] == [("1", "carol"), ("2", "alice"), ("3", "bob"), ("4", "alice")]  # by end
    assert rows[1][4:9] == ["9", "0.0", "0", "-", "-"]  # carol: no min, max yet
    assert rows[4][4:10] == ["5", "12.5", f"{aggregate_stores.BIG:,}", "0.5", "7.0", "Zürich"]  # alice's first
    rows = _cells(SESSIONS.search(client.get("/stores/page_session_orders?top=2").text).group(1))
    assert [r[1] for r in rows[1:]] == ["carol", "alice"]
