"""A real Prometheus server (Debian's package) on loopback scrapes `statestore serve` while a
stream runs: PromQL through Prometheus' HTTP API sees the batches the registry recorded and a
lag that falls to 0 once the stream has caught up; after the stream stops, the writer goes to 0
and the lag grows by exactly the input produced since, as `statestore status` says too."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from statestore.cli.main import main
from statestore.conn import kafka as kafka_io
from statestore.conn.cassandra import create_keyspace
from statestore.core.config import StreamConfig
from statestore.store.book import registry
from statestore.stream.job import JobConfig, start
from tests.integration.conftest import delete_topic, free_port, produce_lines
from tests.integration.http.test_http_api import Server

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus is needed: `make browser` installs it")
LINES = [f"heron weir {i % 11} ford" for i in range(400)]


class Prometheus:
    """A Prometheus server on 127.0.0.1 scraping `target` every second, with its own data dir."""

    def __init__(self, target: str, home: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = home / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            f"  - job_name: statestore\n    scrape_timeout: 1s\n    static_configs: [{{targets: ['{target}']}}]\n"
        )
        self.log = (home / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={home / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.home = home
        self.until(lambda: httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200, "ready")

    def query(self, promql: str) -> float | None:
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5).json()
        assert answer["status"] == "success", answer
        result = answer["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def until(self, check, what: str, timeout_s: float = 90):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.home / "prometheus.log").read_text()[-2000:]
            try:
                if check():
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"Prometheus: {what} not seen within {timeout_s} s")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def test_prometheus_sees_batches_lag_and_the_writer(spark, session, cassandra_config, kafka_config, tmp_path, capsys):
    # A keyspace of its own: /metrics covers every store of the keyspace it serves.
    keyspace = f"it_prom_{uuid.uuid4().hex[:8]}"
    create_keyspace(session, keyspace)
    config = dataclasses.replace(cassandra_config, keyspace=keyspace)
    topic, store = f"it-prom-{uuid.uuid4().hex[:6]}", "scraped"
    kafka_io.ensure_topic(kafka_config, topic, 2)
    produce_lines(kafka_config, topic, LINES)
    serve = Server("--keyspace", keyspace)
    prometheus = Prometheus(f"127.0.0.1:{serve.port}", tmp_path)
    stream = StreamConfig(topic=topic, store=store, checkpoint=str(tmp_path / "cp"), trigger="1s")
    running = start(spark, JobConfig(stream, config, kafka_config))
    try:
        lag = f'sum(statestore_lag_records{{store="{store}"}})'

        def caught_up() -> bool:
            last = registry.progress(session, keyspace, store).last_batch_id
            batches = prometheus.query(f'statestore_batches_total{{store="{store}"}}')
            return last is not None and batches == last + 1 and prometheus.query(lag) == 0

        prometheus.until(caught_up, "the batch count of the registry with lag 0")
        assert prometheus.query(f'statestore_writer_up{{store="{store}"}}') == 1
        assert prometheus.query(f'statestore_stream_state{{store="{store}",state="running"}}') == 1
        assert prometheus.query(f'statestore_restart_seconds{{store="{store}"}}') > 0
        # A scrape is timed after it is answered: the next scrape carries it.
        scrapes = 'statestore_http_request_duration_seconds_count{route="/metrics"}'
        prometheus.until(lambda: (prometheus.query(scrapes) or 0) > 0, "the API's own latency of /metrics")

        running.stop()
        produce_lines(kafka_config, topic, LINES[:40])
        prometheus.until(
            lambda: prometheus.query(f'statestore_writer_up{{store="{store}"}}') == 0 and prometheus.query(lag) == 40,
            "the writer down and a lag of 40",
        )
        assert prometheus.query(f'statestore_stream_state{{store="{store}",state="stopped"}}') == 1
        assert main(["status", store, "--format", "json", "--keyspace", keyspace]) == 0
        status = json.loads(capsys.readouterr().out)
        assert (status["writer_up"], status["lag_total"], status["state"]) == (False, 40, "stopped")
    finally:
        running.stop()
        prometheus.stop()
        serve.stop()
        delete_topic(kafka_config, topic)
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
