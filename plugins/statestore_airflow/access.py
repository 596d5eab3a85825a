"""Who may read the state stores through Airflow's API server: the plugin's permission model.

Everything under /statestore (the store page, the maintenance reports under /statestore/reports
and the read-only query API under /statestore/api) needs read access to the Airflow connection
the page reads the stores through, `statestore_cassandra`: the auth manager's

    is_authorized_connection(method="GET", details=ConnectionDetails(conn_id="statestore_cassandra"))

the same check as Airflow's own GET /api/v2/connections/statestore_cassandra. No Airflow login:
401; logged in without the permission: 403; with it: the page.

Why the connection:
  - The page is a window on that connection: it reads Cassandra with the connection's
    credentials, so a user reads the stores with the connection's authority. Tying the two
    keeps one rule for both: a role kept away from the connection is kept away from what it
    reaches (the stores' keys and values, per-key sizes and top keys in the reports).
  - Every auth manager implements it, with defaults that need no setup: SimpleAuthManager lets
    the op and admin roles read connections and refuses viewer and user; FAB gives
    (can_read, Connections) to Op and Admin, not to Viewer or User. The connection's id goes in
    the details, so an auth manager with per-connection policies can allow this one alone, and
    in multi-team mode the connection's team is checked as Airflow's own endpoints check it.
  - Reading a connection does not disclose its secret: Airflow's API redacts the password and
    sensitive extras, so granting it to a store reader hands out no Cassandra password.
Rejected:
  - AccessView (is_authorized_view) or DAG read: SimpleAuthManager grants both to every role,
    viewer included, so nothing would change from a bare login; and neither is about stores.
  - A custom resource ("State Stores") through is_authorized_custom_view: SimpleAuthManager
    grants every custom view to every role (viewer included); FAB checks the (action, resource)
    pair in the user's roles, but nothing creates the resource (`airflow roles add-perms`
    refuses an unknown resource), so out of the box no one, Admin included, could read them.

Granting it:
  SimpleAuthManager  role op or admin in `[core] simple_auth_manager_users` ("alice:op").
  FAB                Op and Admin have it. Another role:
                         airflow roles add-perms Viewer -r Connections -a can_read
                     FAB's permission is per resource type: the role then reads every
                     connection's non-secret fields (the API redacts passwords).
  Others             GET on the Connection resource, for the id statestore_cassandra.

The user comes from Airflow's own rule (airflow.api_fastapi.core_api.security.get_user): an
`Authorization: Bearer` token, else the UI's `_token` cookie (as JWTRefreshMiddleware refreshed
it), validated by the auth manager (signature, expiry, revocation). The check is a middleware of
the plugin's app, so it covers every path under /statestore, the mounted query API included and
unknown paths alike (a FastAPI dependency would not reach into a mounted app). The app serves
only reads; a request with another method would need that method on the connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

# A request's HTTP method -> the auth manager's method on the connection (reads are GET); any
# other method counts as the strongest, DELETE.
_METHODS = {"GET": "GET", "HEAD": "GET", "OPTIONS": "GET", "POST": "POST", "PUT": "PUT", "PATCH": "PUT"}


def may_use_connection(user: Any, connection_id: str, method: str = "GET") -> bool:
    """Whether Airflow's auth manager lets `user` do `method` on the connection `connection_id`
    (blocking: an auth manager may ask a database or a server, as FAB and Keycloak do)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails
    from airflow.configuration import conf

    team = None
    if conf.getboolean("core", "multi_team", fallback=False):
        from airflow.models.connection import Connection

        team = Connection.get_team_name(connection_id)
    details = ConnectionDetails(conn_id=connection_id, team_name=team)
    return get_auth_manager().is_authorized_connection(method=method, details=details, user=user)


async def airflow_user(request: Request) -> Any:
    """The Airflow user behind the request, by Airflow's rule; HTTPException 401 (no login or
    an expired token) or 403 (a token that is not valid)."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    return await get_user(request, None, await bearer_scheme(request))


def require_connection_access(connection_id: str) -> Callable[[Request, Callable], Awaitable[Response]]:
    """An HTTP middleware: every request needs an Airflow login allowed to use `connection_id`
    (GET for reads)."""

    async def require(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        try:
            user = await airflow_user(request)
        except HTTPException as exc:
            hint = ": log in to Airflow first" if exc.status_code == 401 else ""
            return JSONResponse({"detail": f"{exc.detail}{hint}"}, exc.status_code)
        method = _METHODS.get(request.method, "DELETE")
        if not await run_in_threadpool(may_use_connection, user, connection_id, method):
            need = "read" if method == "GET" else method
            detail = f"Forbidden: the state stores need {need} access to the Airflow connection {connection_id!r}"
            return JSONResponse({"detail": detail}, 403)
        return await call_next(request)

    return require
