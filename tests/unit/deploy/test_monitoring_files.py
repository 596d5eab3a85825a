"""The deployment's monitoring files: the Grafana dashboard's queries are valid PromQL (checked
by promtool as recording rules) over metrics /metrics serves, and the compose Prometheus
scrapes the API service with the rules beside its config."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[3]
DASHBOARD = json.loads((PROJECT / "deploy" / "grafana" / "statestore.json").read_text())
SERVED = {  # what statestore.http.metrics exposes (tests/unit/http/test_metrics.py checks it)
    "statestore_lag_records", "statestore_batches_total", "statestore_batch_duration_seconds_sum",
    "statestore_batch_duration_seconds_count", "statestore_rows_written_total", "statestore_rows_skipped_total",
    "statestore_dead_letters_total", "statestore_last_batch_timestamp_seconds", "statestore_entries_estimate",
    "statestore_stream_state", "statestore_writer_up", "statestore_restart_seconds", "statestore_kafka_up",
    "statestore_http_request_duration_seconds_bucket",
}  # fmt: skip


def _expressions() -> list[str]:
    return [t["expr"] for panel in DASHBOARD["panels"] for t in panel["targets"]]


def test_the_dashboard_queries_only_served_metrics():
    used = {m for expr in _expressions() for m in re.findall(r"statestore_[a-z_]+", expr)}
    assert used and used <= SERVED, used - SERVED
    assert len({p["id"] for p in DASHBOARD["panels"]}) == len(DASHBOARD["panels"])


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is needed: `make browser` installs it")
def test_the_dashboard_queries_are_valid_promql(tmp_path):
    rules = {
        "groups": [
            {"name": "dashboard", "rules": [{"record": f"panel:{i}", "expr": e} for i, e in enumerate(_expressions())]}
        ]
    }
    (tmp_path / "panels.yml").write_text(yaml.safe_dump(rules))
    done = subprocess.run(["promtool", "check", "rules", "panels.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp_path / "bad.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "r", "expr": "rate("}]}]})
    )
    assert subprocess.run(["promtool", "check", "rules", "bad.yml"], cwd=tmp_path, capture_output=True).returncode != 0


def test_compose_prometheus_scrapes_the_api_with_the_rules():
    compose = yaml.safe_load((PROJECT / "docker-compose.yaml").read_text())["services"]
    config = yaml.safe_load((PROJECT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    api = compose["statestore-api"]
    port = api["command"][api["command"].index("--port") + 1]
    assert config["scrape_configs"][0]["static_configs"][0]["targets"] == [f"statestore-api:{port}"]
    assert config["rule_files"] == ["alerts.yml"] and (PROJECT / "deploy" / "prometheus" / "alerts.yml").is_file()
    assert "./deploy/prometheus:/etc/prometheus:ro" in compose["prometheus"]["volumes"]
    assert api["environment"]["STATESTORE_KAFKA_BOOTSTRAP"] == "kafka:29092"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is needed: `make browser` installs it")
def test_the_compose_prometheus_config_is_valid_with_its_token_file(tmp_path):
    """promtool checks the config as Prometheus loads it, the token file included (it must exist:
    here a stand-in for the compose secret)."""
    source = PROJECT / "deploy" / "prometheus"
    text = (source / "prometheus.yml").read_text()
    token = yaml.safe_load(text)["scrape_configs"][0]["authorization"]["credentials_file"]
    (tmp_path / "token").write_text("0123456789abcdef0123456789abcdef\n")
    (tmp_path / "prometheus.yml").write_text(text.replace(token, str(tmp_path / "token")))
    shutil.copy(source / "alerts.yml", tmp_path / "alerts.yml")
    done = subprocess.run(
        ["promtool", "check", "config", "prometheus.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
