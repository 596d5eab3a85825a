"""The API's hot route, a point get on a warm store, answered before FastAPI's routing.

This ASGI middleware answers exactly one shape of request, `GET /stores/{store}/keys/{key}` with
no query string (so no `as_of`: the current value, of any store type), when the catalog already
holds the store's handle warm, skipping FastAPI's per-request parameter validation and response
serialization. It reads with the driver's asynchronous call awaited on the event loop
(`get_async`, read cache included; concurrent gets of a key-value store joined into one read by
statestore.http.coalesce) and answers with the route's own body (`record_for`) and error answers
(statestore.http.answers).

The rule it keeps: everything else, including every request with a query string, goes on to
FastAPI unchanged, so parameter validation and the OpenAPI document keep one home.
"""

from __future__ import annotations

from fastapi import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from statestore.core.errors import StateStoreError
from statestore.http.answers import DRIVER_ERRORS, answer
from statestore.http.coalesce import GetCoalescer
from statestore.http.paths import app_path
from statestore.http.routes import record_for
from statestore.present.text import parse_key


def point_get_target(scope: Scope) -> tuple[str, str] | None:
    """(store, key) when `scope` is a plain point get this path may answer, else None."""
    if scope["type"] != "http" or scope["method"] != "GET" or scope["query_string"]:
        return None
    parts = app_path(scope).split("/", 4)  # "", "stores", store, "keys", key (which may hold slashes)
    if len(parts) != 5 or parts[0] or parts[1] != "stores" or parts[3] != "keys" or not parts[2] or not parts[4]:
        return None
    return parts[2], parts[4]


class PointGetFastPath:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._coalescers: dict[str, GetCoalescer] = {}

    def _read(self, store: str, handle):
        """The awaitable read of a key: joined with the other gets of this turn for key-value
        stores (statestore.http.coalesce), alone for versioned stores' current values."""
        if handle.VERSIONED:
            return handle.get_async
        coalescer = self._coalescers.get(store)
        if coalescer is None or coalescer.handle is not handle:  # a store re-opened: its new handle
            coalescer = self._coalescers[store] = GetCoalescer(handle)
        return coalescer.get

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        target = point_get_target(scope)
        handle = None if target is None else scope["app"].state.catalog.warm(target[0])
        if handle is None:
            await self.app(scope, receive, send)
            return
        key = target[1]
        try:
            parsed = parse_key(key, handle.key_codec)
            record = record_for(handle, key, parsed, await self._read(target[0], handle)(parsed))
            response = Response(record.model_dump_json(), media_type="application/json")
        except (StateStoreError, *DRIVER_ERRORS) as exc:
            response = answer(exc)
        await response(scope, receive, send)
