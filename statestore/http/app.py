"""The read-only HTTP API over the stores of one keyspace (FastAPI).

`create_app()` does no I/O: the Cassandra settings are resolved and the session connected on
the first request, so the app can be built at import time (an Airflow plugin mounts it) and
served by `statestore serve`. Errors are JSON (ErrorBody): 400 for bad parameters (a key that
does not parse with the store's codec, a bad page token, a limit out of range, an operation
the store type does not support), 404 for an unknown store or key, 500 for stored data its
codec cannot decode, 503 when Cassandra does not answer; with a token (statestore.http.access),
401 for a request without it. `/health` answers 200 without any I/O: the process serves.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from statestore import __version__
from statestore.core import config as cfg
from statestore.core.config import KafkaConfig
from statestore.core.errors import StateStoreError
from statestore.http.access import BearerAuth
from statestore.http.answers import DRIVER_ERRORS, answer, error
from statestore.http.catalog import ConfigSource, StoreCatalog
from statestore.http.fast_get import PointGetFastPath
from statestore.http.metrics import KafkaSource, Metrics, RequestTimer, metrics_route
from statestore.http.routes import router
from statestore.http.shedding import LoadShedder, ShedLimits
from statestore.store.cache import CacheOptions

_log = logging.getLogger(__name__)

DESCRIPTION = """Read-only queries over the state stores of one Cassandra keyspace: no RPC layer, the API
reads the tables directly (a point get is one query; scans read every store partition concurrently).

Keys in paths and in `from`/`to`/`prefix` are text read with the store's key codec: `string` as is,
`long`/`int` as decimal integers, `json` as JSON text, `bytes` as hex. Values come back as JSON
(`bytes` as hex text). `/entries` pages with `next_page_token`: partitioned stores in key byte order,
global stores in Cassandra's token (hash) order, which is stable but not sorted.
"""


def _from_environment():
    return cfg.resolve(KafkaConfig)


async def _known_error(request: Request, exc: Exception) -> JSONResponse:
    return answer(exc)


async def _bad_parameters(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'request'}: {e.get('msg', 'invalid')}"
        for e in exc.errors()
    )
    return error(400, problems or "invalid request")


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return error(exc.status_code, str(exc.detail))


async def _health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    _log.exception("unexpected error serving %s", request.url.path)
    return error(500, f"unexpected error: {type(exc).__name__}")


def create_app(
    cassandra: ConfigSource = None,
    *,
    cache: CacheOptions | None = None,
    kafka: KafkaSource = _from_environment,
    shedding: ShedLimits | None = None,
    token: str | None = None,
    open_paths: Collection[str] = (),
) -> FastAPI:
    """The API app. `cassandra`: the settings, a function returning them (called on the first
    request), or None to resolve them from the STATESTORE_* environment then. `cache`: the
    opt-in read cache for point gets (reads may then be up to its TTL behind the store).
    `kafka`: where /metrics asks for end offsets (lag); by default the STATESTORE_KAFKA_*
    environment at scrape time, None for no lag. `shedding`: how much load is admitted before
    requests are answered 503 (None: all of it, as when mounted in Airflow's API server).
    `token`: the bearer token every request must carry but those for `open_paths` (/health,
    /metrics); None: none asked (on loopback, or behind Airflow's login)."""
    app = FastAPI(
        title="statestore",
        version=__version__,
        description=DESCRIPTION,
        openapi_tags=[{"name": "stores", "description": "stream state stores in Cassandra"}],
        generate_unique_id_function=lambda route: route.name,  # operationIds: list_stores, get_key, ...
    )
    app.state.catalog = StoreCatalog(cassandra, cache)
    app.state.metrics = Metrics(app.state.catalog, kafka)
    app.include_router(router)
    app.add_route("/metrics", metrics_route, include_in_schema=False)
    app.add_route("/health", _health, include_in_schema=False)
    app.add_middleware(PointGetFastPath)
    if shedding is not None:
        app.add_middleware(LoadShedder, limits=shedding, on_shed=app.state.metrics.shed.inc)
    if token is not None:  # outside the fast path and the shedder: nothing is read or queued without it
        app.add_middleware(BearerAuth, token=token, open_paths=open_paths)
    app.add_middleware(RequestTimer, metrics=app.state.metrics)  # outermost: times shed requests too
    for known in (StateStoreError, *DRIVER_ERRORS):
        app.add_exception_handler(known, _known_error)
    app.add_exception_handler(RequestValidationError, _bad_parameters)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    app.openapi = lambda: _openapi(app, bearer=token is not None)
    return app


def _openapi(app: FastAPI, bearer: bool = False) -> dict:
    """FastAPI's document without its 422 answers: bad parameters are 400 (ErrorBody) here; with
    `bearer`, the token every operation needs (and its 401)."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            tags=app.openapi_tags,
        )
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        for name in ("HTTPValidationError", "ValidationError"):
            schema.get("components", {}).get("schemas", {}).pop(name, None)
        if bearer:
            schema.setdefault("components", {})["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            schema["security"] = [{"bearer": []}]
            unauthorized = {
                "description": "no bearer token, or another one",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
            }
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.setdefault("responses", {})["401"] = unauthorized
        app.openapi_schema = schema
    return app.openapi_schema
