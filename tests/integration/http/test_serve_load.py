"""`statestore serve` under concurrent load, as real processes over the real Cassandra: point
gets that arrive together are each answered right (they are read together); `--workers 2`
spreads connections over two processes and replaces one that dies; an overloaded server sheds
with 503 and Retry-After, counts what it shed, and keeps answering /metrics."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys

import httpx
import psutil
import pytest

from statestore.store.builder import StoreBuilder, open_store
from tests.integration.conftest import wait_until
from tests.integration.http.test_http_api import Server

KEYS = [f"k{i:04d}" for i in range(600)]


@pytest.fixture(scope="module")
def loaded(session, keyspace):
    store = StoreBuilder(session, "load_words").with_keyspace(keyspace).partitioned_key_value_store(5).create()
    store.put_all([(k, i) for i, k in enumerate(KEYS)])
    glob = StoreBuilder(session, "load_global").with_keyspace(keyspace).global_key_value_store().create()
    glob.put_all([(k, -i) for i, k in enumerate(KEYS[:150])])
    return keyspace


def test_get_many_reads_every_key_across_partitions_and_chunks(session, loaded):
    for name, expected in (("load_words", {k: i for i, k in enumerate(KEYS)}), ("load_global", None)):
        store = open_store(session, loaded, name)
        if expected is None:
            expected = {k: -i for i, k in enumerate(KEYS[:150])}
        # More keys than one query's chunk, repeated keys and absent keys, in no particular order.
        asked = [*reversed(KEYS), "absent-1", KEYS[3], "absent-2"]
        answers = asyncio.run(store.get_many_async(asked))
        assert answers == [expected.get(k) for k in asked]


def _concurrent_gets(url: str, paths: list[str], connections: int) -> list[httpx.Response]:
    async def run():
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
            return await asyncio.gather(*(client.get(p) for p in paths))

    return asyncio.run(run())


def test_gets_arriving_together_each_get_their_own_answer(loaded):
    server = Server("--keyspace", loaded, "--max-queue", "1000")
    try:
        httpx.get(f"{server.url}/stores/load_words/keys/{KEYS[0]}", timeout=10)  # opens the store: warm
        asked = KEYS[::3] + ["missing-key"] * 5
        answers = _concurrent_gets(server.url, [f"/stores/load_words/keys/{k}" for k in asked], 64)
        for key, answer in zip(asked, answers, strict=True):
            if key == "missing-key":
                assert answer.status_code == 404, answer.text
            else:
                assert answer.status_code == 200, answer.text
                assert answer.json()["value"] == KEYS.index(key), key
    finally:
        server.stop()


def _workers_of(server: Server) -> list[psutil.Process]:
    """The live worker processes (a killed one is a zombie until the parent reaps it)."""
    workers = []
    for child in psutil.Process(server.process.pid).children():
        try:
            if "spawn_main" in " ".join(child.cmdline()):
                workers.append(child)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
    return workers


def test_two_workers_share_the_port_and_one_that_dies_is_replaced(loaded):
    server = Server("--keyspace", loaded, "--workers", "2")
    try:
        workers = wait_until(lambda: (w := _workers_of(server)) and len(w) == 2 and w, 60, "two workers", every_s=0.2)
        clients = [httpx.Client(base_url=server.url, timeout=30) for _ in range(24)]
        try:
            for n, client in enumerate(clients):
                assert client.get(f"/stores/load_words/keys/{KEYS[n]}").json()["value"] == n
            # Each worker holds some of the 24 open connections (the kernel spreads them).
            held = {w.pid: sum(1 for c in w.net_connections() if c.laddr.port == server.port) for w in workers}
            assert all(count > 0 for count in held.values()), held
        finally:
            for client in clients:
                client.close()
        victim = workers[0]
        os.kill(victim.pid, signal.SIGKILL)
        replaced = wait_until(
            lambda: (w := _workers_of(server)) and len(w) == 2 and victim.pid not in {p.pid for p in w} and w,
            60,
            "a new worker in place of the killed one",
            every_s=0.2,
        )
        for n in range(40):  # fresh connections, over both workers: every answer right
            answer = httpx.get(f"{server.url}/stores/load_words/keys/{KEYS[n]}", timeout=30)
            assert answer.status_code == 200 and answer.json()["value"] == n
        # Whichever worker a scrape reaches, the request counts are the whole server's: the 64
        # gets, the killed worker's among them.
        for _ in range(6):
            assert _requests_counted(server.url, "/stores/{store}/keys/{key}") == 24 + 40
    finally:
        server.stop()
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in replaced)


def _requests_counted(url: str, route: str) -> float:
    """The request-latency histogram's count for `route`, over every method and status."""
    scrape = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in scrape.splitlines()
        if line.startswith("statestore_http_request_duration_seconds_count{") and f'route="{route}"' in line
    )


def _shed_count(url: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("statestore_http_requests_shed_total "):
            return float(line.split()[1])
    raise AssertionError("no statestore_http_requests_shed_total in /metrics")


def test_an_overloaded_server_sheds_with_503_and_retry_after(loaded):
    server = Server("--keyspace", loaded, "--max-active", "1", "--max-queue", "2", "--retry-after", "7")
    try:
        assert _shed_count(server.url) == 0
        # Scans of 500 entries take a while each: with one slot and two places in the queue,
        # most of 40 at once must be shed.
        answers = _concurrent_gets(server.url, ["/stores/load_words/entries?limit=500"] * 40, 40)
        shed = [a for a in answers if a.status_code == 503]
        served = [a for a in answers if a.status_code == 200]
        assert len(shed) + len(served) == 40, [a.status_code for a in answers]
        assert served and len(shed) >= 20
        for answer in shed:
            assert answer.headers["retry-after"] == "7"
            body = json.loads(answer.content)
            assert body["status"] == 503 and "overloaded" in body["detail"]
        for answer in served:
            assert len(answer.json()["entries"]) == 500
        assert _shed_count(server.url) == len(shed)
    finally:
        server.stop()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_already_taken_is_one_clear_error_before_any_worker_starts(workers):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        argv = [sys.executable, "-m", "statestore", "serve", "--port", str(port), "--workers", workers]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "Choose another --port" in done.stderr
    assert "worker" not in done.stderr.lower()  # refused by the parent, not by a worker it started
