"""The store page app without Cassandra or Airflow: report files, the last audit, no I/O when built."""

from __future__ import annotations

import json

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
import pytest
from fastapi.testclient import TestClient
from statestore_airflow import store_page


def _unreachable():
    raise AssertionError("the Cassandra settings were asked for, but this request needs none")


@pytest.fixture
def client(tmp_path):
    app = store_page.create_store_app(_unreachable, lambda: tmp_path, authenticate=False)  # builds without I/O
    return TestClient(app)


def test_report_files_are_served_by_name_only(client, tmp_path):
    (tmp_path / "audit_partitions.html").write_text("<h1>audit</h1>")
    (tmp_path / "secret.txt").write_text("no")
    assert client.get("/reports/audit_partitions.html").text == "<h1>audit</h1>"
    assert client.get("/reports/secret.txt").status_code == 404
    assert client.get("/reports/missing.json").status_code == 404
    assert client.get("/reports/..%2Fetc%2Fpasswd").status_code == 404


def test_last_audit_headline(tmp_path):
    assert store_page.last_audit(tmp_path) is None
    report = {
        "generated_at": "2026-11-22T03:30:00+00:00",
        "status": "warn",
        "stores": [{"store": "words", "level": "warn", "entries": 10, "largest": {"bytes": 2048}}],
    }
    (tmp_path / "audit_partitions.json").write_text(json.dumps(report))
    assert store_page.last_audit(tmp_path) == {
        "generated_at": "2026-11-22T03:30:00+00:00",
        "status": "warn",
        "stores": {"words": {"level": "warn", "largest_bytes": 2048, "entries": 10}},
        "html": False,
    }
    (tmp_path / "audit_partitions.json").write_text("{not json")
    assert "cannot be read" in store_page.last_audit(tmp_path)["error"]


def test_the_query_api_is_mounted_under_api(client):
    assert client.get("/api/openapi.json").json()["info"]["title"] == "statestore"
