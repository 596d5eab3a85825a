"""The store page's permission with Airflow's real auth manager, without Cassandra.

SimpleAuthManager with one user of each of its roles, logged in through its real /auth/token
route; the plugin's store app (statestore_airflow.store_page, access checked) mounted beside it
as Airflow's API server mounts plugin apps. Only paths that need no Cassandra are asked for:
the reports and the query API's OpenAPI document. Airflow's metadata database is needed (the
auth manager looks every token up in its revoked-token table): a few seconds.
"""

from __future__ import annotations

import json

import tests.airflow_env as airflow_env

# isort: split
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from statestore_airflow import store_page

ROLES = ("viewer", "user", "op", "admin")  # SimpleAuthManager's; each user is named after their role
READERS = {"op", "admin"}  # the roles SimpleAuthManager lets read connections
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
PATHS = ("/statestore/reports/audit_partitions.json", "/statestore/api/openapi.json")


def _unreachable():
    raise AssertionError("the Cassandra settings were asked for, but this request needs none")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    airflow_env.migrate_db()
    home = tmp_path_factory.mktemp("store-access")
    (home / "audit_partitions.json").write_text(json.dumps({"status": "ok", "stores": []}))
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({role: f"{role}-password" for role in ROLES}))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AIRFLOW__CORE__AUTH_MANAGER", SIMPLE_AUTH_MANAGER)
        env.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", ",".join(f"{role}:{role}" for role in ROLES))
        env.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(passwords))
        from airflow.api_fastapi.app import init_auth_manager

        app = FastAPI()
        init_auth_manager(app)
        app.mount("/statestore", store_page.create_store_app(_unreachable, lambda: home))
        with TestClient(app) as client:
            yield client


def _token(client: TestClient, role: str) -> str:
    response = client.post("/auth/token", json={"username": role, "password": f"{role}-password"})
    assert response.status_code == 201, response.text
    return response.json()["access_token"]


@pytest.mark.parametrize("role", ROLES)
def test_only_roles_that_read_connections_read_the_stores(client, role):
    token = {"Authorization": f"Bearer {_token(client, role)}"}
    for path in PATHS:
        response = client.get(path, headers=token)
        if role in READERS:
            assert response.status_code == 200, (path, response.text)
        else:
            assert response.status_code == 403, (path, response.text)
            assert response.json()["detail"] == (
                "Forbidden: the state stores need read access to the Airflow connection 'statestore_cassandra'"
            )
    # Unknown paths too: a user without the permission learns nothing of what the app serves.
    assert client.get("/statestore/nowhere", headers=token).status_code == (404 if role in READERS else 403)


def test_a_login_is_checked_before_the_permission(client):
    assert client.get(PATHS[0]).status_code == 401
    assert "log in to Airflow first" in client.get(PATHS[0]).json()["detail"]
    assert client.get(PATHS[0], headers={"Authorization": "Bearer not-a-jwt"}).status_code == 403
    from airflow.api_fastapi.app import get_auth_manager

    token = _token(client, "admin")
    assert client.get(PATHS[0], headers={"Authorization": f"Bearer {token}"}).status_code == 200
    get_auth_manager().revoke_token(token)  # as logging out does
    assert client.get(PATHS[0], headers={"Authorization": f"Bearer {token}"}).status_code == 403


def test_the_ui_cookie_is_read_when_there_is_no_header(client):
    client.cookies.clear()
    try:
        client.cookies.set("_token", _token(client, "viewer"))
        assert client.get(PATHS[0]).status_code == 403
        # A header wins over the cookie, as in Airflow's own endpoints.
        assert client.get(PATHS[0], headers={"Authorization": f"Bearer {_token(client, 'op')}"}).status_code == 200
        client.cookies.set("_token", _token(client, "op"))
        assert client.get(PATHS[0]).status_code == 200
    finally:
        client.cookies.clear()
