"""`statestore serve` beyond loopback with TLS and a token, over the real Cassandra: a client
with the token reads a store through two workers (each given the token its parent read from
the file STATESTORE_HTTP_TOKEN_FILE names); a real Prometheus with the compose deployment's
scrape authorization (deploy/prometheus/prometheus.yml) scrapes /metrics over TLS, and a scrape
without the token is refused. The token check without Cassandra is tests/unit/http."""

from __future__ import annotations

import dataclasses
import os
import shutil
import ssl
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from statestore.conn.cassandra import create_keyspace
from statestore.core import config as cfg
from statestore.store.builder import StoreBuilder
from tests.integration.conftest import free_port, wait_until
from tests.tls_files import make_tls_files

PROJECT = Path(__file__).resolve().parents[3]
TOKEN = "7e57ab1e" * 8


@pytest.fixture
def own_keyspace(session):
    # A keyspace of its own: /metrics reads every store of the keyspace it serves.
    name = f"it_sec_{uuid.uuid4().hex[:8]}"
    create_keyspace(session, name)
    yield name
    session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=120)


def _prometheus(home: Path, target: str, ca: Path, token_file: Path) -> tuple[subprocess.Popen, str]:
    """Prometheus scraping `target` every second twice over: as the compose deployment does (its
    job, its authorization block, the token file in place of the secret) and with no token."""
    deployed = yaml.safe_load((PROJECT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    job = deployed["scrape_configs"][0]
    job["authorization"]["credentials_file"] = str(token_file)
    tls = {"scheme": "https", "tls_config": {"ca_file": str(ca)}, "static_configs": [{"targets": [target]}]}
    jobs = [{**job, **tls}, {"job_name": "without_token", **tls}]
    for scrape in jobs:
        scrape.update(scrape_interval="1s", scrape_timeout="1s")
    (home / "prometheus.yml").write_text(yaml.safe_dump({"scrape_configs": jobs}))
    port = free_port()
    log = (home / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            shutil.which("prometheus"),
            f"--config.file={home / 'prometheus.yml'}",
            f"--storage.tsdb.path={home / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return process, f"http://127.0.0.1:{port}"


def _up(url: str) -> dict[str, float]:
    """Prometheus' `up` per job; none while it still starts (it answers 503, not JSON, then)."""
    answer = httpx.get(f"{url}/api/v1/query", params={"query": "up"}, timeout=5)
    if answer.status_code != 200:
        return {}
    return {r["metric"]["job"]: float(r["value"][1]) for r in answer.json()["data"]["result"]}


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="Debian's prometheus is needed: `make browser`")
def test_tls_and_token_end_to_end_with_two_workers_and_prometheus(session, cassandra_config, own_keyspace, tmp_path):
    words = (
        StoreBuilder(session, "guarded").with_keyspace(own_keyspace).partitioned_key_value_store(partitions=3).create()
    )
    words.put_all([("heron", 7), ("weir", 3)])
    tls = make_tls_files(tmp_path / "tls")
    token_file = tmp_path / "api-token"
    token_file.write_text(TOKEN + "\n")
    port = free_port()
    env = {
        **os.environ,
        **cfg.to_environment(dataclasses.replace(cassandra_config, keyspace=own_keyspace)),
        "STATESTORE_HTTP_TOKEN_FILE": str(token_file),  # the parent reads it; its workers get the token
    }
    argv = [
        sys.executable, "-m", "statestore", "serve", "--host", "0.0.0.0", "--port", str(port), "--workers", "2",
        "--tls-cert", str(tls.cert), "--tls-key", str(tls.key), "--no-access-log",
    ]  # fmt: skip
    log_path = tmp_path / "serve.log"
    trusted = ssl.create_default_context(cafile=str(tls.ca))
    url = f"https://127.0.0.1:{port}"
    right = {"Authorization": f"Bearer {TOKEN}"}
    prometheus = None
    with log_path.open("wb") as log:
        server = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
    try:

        def answers() -> bool:
            assert server.poll() is None, log_path.read_text()
            try:
                return httpx.get(f"{url}/health", headers=right, verify=trusted, timeout=5).status_code == 200
            except httpx.TransportError:
                return False  # not listening yet

        wait_until(answers, 60, "serve answering /health over TLS", every_s=0.2)
        with httpx.Client(verify=trusted, timeout=10) as client:
            for _ in range(6):  # new connections: the kernel spreads them over both workers
                got = client.get(f"{url}/stores/guarded/keys/heron", headers={**right, "Connection": "close"})
                assert got.status_code == 200 and got.json()["value"] == 7, got.text
            listed = client.get(f"{url}/stores", headers=right).json()
            assert [s["name"] for s in listed["stores"]] == ["guarded"]
            missing = client.get(f"{url}/stores/guarded/keys/heron")
            assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")

        prometheus, prom = _prometheus(tmp_path, f"127.0.0.1:{port}", tls.ca, token_file)
        deployed_job = yaml.safe_load((PROJECT / "deploy" / "prometheus" / "prometheus.yml").read_text())
        job = deployed_job["scrape_configs"][0]["job_name"]

        def both_scraped() -> bool:
            assert prometheus.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            try:
                up = _up(prom)
            except httpx.TransportError:
                return False  # not listening yet
            return up.get(job) == 1 and up.get("without_token") == 0

        wait_until(both_scraped, 60, "the compose job up with the token and the other down without it")
        entries = 'statestore_entries_estimate{store="guarded"}'
        answer = httpx.get(f"{prom}/api/v1/query", params={"query": entries}, timeout=5).json()
        assert answer["data"]["result"], answer  # the scrape read the store's metrics
    finally:
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=30)
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    log = log_path.read_text()
    assert "serving https (TLS); every request needs the bearer token" in log
    assert "exited with code" not in log  # no worker died (as they did with a *_FILE variable beside its secret)
    assert TOKEN not in log
