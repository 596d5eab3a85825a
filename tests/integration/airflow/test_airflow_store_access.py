"""Who may read the stores through the API server: two Airflow users of different roles.

The plugin's own app (the one StateStorePlugin hands Airflow, reading the `statestore_cassandra`
connection) is mounted as Airflow's API server mounts it, next to the auth manager's own app
(/auth: the real login), with the auth manager Airflow is configured with: SimpleAuthManager,
here with a `viewer` and an `op`. Each logs in with their password and gets a JWT signed by
Airflow; the same requests then go out with each token. In process, against the test keyspace:
seconds, no API server to start.
"""

from __future__ import annotations

import json

import tests.airflow_env as airflow_env

# isort: split
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from statestore.store import admin
from statestore.store.builder import open_store

STORE = "access_words"
COUNTS = {"river": 41, "stone": 17}
USERS = {"viewer": "viewer", "op": "op"}  # name -> role; the passwords are the names reversed
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
AUDIT = {"generated_at": "2026-11-22T03:30:00+00:00", "status": "ok", "stores": []}


@pytest.fixture(scope="module")
def airflow_api(session, keyspace, cassandra_config, tmp_path_factory):
    """The plugin's app at its url_prefix and the auth manager's app at /auth, as the API
    server mounts them (airflow.api_fastapi.app.init_auth_manager and init_plugins)."""
    airflow_env.migrate_db()  # the auth manager looks tokens up in the revoked-token table
    home = tmp_path_factory.mktemp("store-access")
    reports = home / "reports"
    reports.mkdir()
    (reports / "audit_partitions.json").write_text(json.dumps(AUDIT))
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({name: name[::-1] for name in USERS}))
    connection = {"conn_type": "cassandra", "host": "127.0.0.1", "port": cassandra_config.port, "schema": keyspace}
    admin.create_store(session, keyspace, STORE, "partitioned-kv", 3)
    open_store(session, keyspace, STORE).put_all(COUNTS.items())
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("AIRFLOW__CORE__AUTH_MANAGER", SIMPLE_AUTH_MANAGER)
            env.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", ",".join(f"{n}:{r}" for n, r in USERS.items()))
            env.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(passwords))
            env.setenv("AIRFLOW_CONN_STATESTORE_CASSANDRA", json.dumps(connection))
            env.delenv("AIRFLOW_CONN_STATESTORE_KAFKA", raising=False)
            env.setenv("STATESTORE_REPORT_DIR", str(reports))
            from airflow.api_fastapi.app import init_auth_manager
            from statestore_airflow.plugin import StateStorePlugin

            app = FastAPI()
            init_auth_manager(app)
            (mounted,) = StateStorePlugin.fastapi_apps
            app.mount(mounted["url_prefix"], mounted["app"])
            with TestClient(app) as client:
                yield client
    finally:
        admin.drop_store(session, keyspace, STORE, confirm=STORE)  # later tests list every store of the keyspace


def _token(client: TestClient, name: str) -> str:
    response = client.post("/auth/token", json={"username": name, "password": name[::-1]})
    assert response.status_code == 201, response.text
    return response.json()["access_token"]


PATHS = (
    "/statestore/",
    f"/statestore/stores/{STORE}",
    "/statestore/reports/audit_partitions.json",
    "/statestore/api/stores",
    f"/statestore/api/stores/{STORE}/keys/river",
)


def test_a_viewer_is_refused_the_stores_an_op_reads_them(airflow_api):
    viewer, op = ({"Authorization": f"Bearer {_token(airflow_api, name)}"} for name in ("viewer", "op"))
    for path in PATHS:
        assert airflow_api.get(path).status_code == 401, path  # no login at all
        refused = airflow_api.get(path, headers=viewer)
        assert refused.status_code == 403, (path, refused.text)
        assert "statestore_cassandra" in refused.json()["detail"]  # says which permission is missing
        assert airflow_api.get(path, headers=op).status_code == 200, path

    assert f'<tr data-store="{STORE}">' in airflow_api.get("/statestore/", headers=op).text
    assert f'<span id="store-name">{STORE}</span>' in airflow_api.get(f"/statestore/stores/{STORE}", headers=op).text
    assert airflow_api.get("/statestore/reports/audit_partitions.json", headers=op).json() == AUDIT
    assert STORE in [s["name"] for s in airflow_api.get("/statestore/api/stores", headers=op).json()["stores"]]
    assert airflow_api.get(f"/statestore/api/stores/{STORE}/keys/river", headers=op).json()["value"] == 41


def test_the_ui_cookie_carries_the_same_permission(airflow_api):
    """In the UI the page is opened with Airflow's session cookie, not a header."""
    airflow_api.cookies.clear()
    try:
        airflow_api.cookies.set("_token", _token(airflow_api, "viewer"))
        assert airflow_api.get("/statestore/").status_code == 403
        airflow_api.cookies.set("_token", _token(airflow_api, "op"))
        assert airflow_api.get("/statestore/").status_code == 200
    finally:
        airflow_api.cookies.clear()
