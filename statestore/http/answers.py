"""The API's error answers, shared by FastAPI's exception handlers and the point-get fast path.

Every error is JSON (models.ErrorBody): 400 for bad parameters, 404 for an unknown store or
key, 500 for stored data its codec cannot decode, 503 when Cassandra does not answer.
"""

from __future__ import annotations

from cassandra import OperationTimedOut, RequestExecutionException
from cassandra.cluster import NoHostAvailable
from fastapi.responses import JSONResponse

from statestore.core.errors import (
    CassandraUnavailableError,
    KeyspaceMissingError,
    StateStoreError,
    StoredDataError,
    StoreNotFoundError,
)

DRIVER_ERRORS = (NoHostAvailable, OperationTimedOut, RequestExecutionException)
_WORDS = {400: "bad request", 401: "unauthorized", 404: "not found", 503: "unavailable", 500: "internal error"}


class KeyNotFoundError(StateStoreError, LookupError):
    """The key is not in the store (at the requested time)."""


def error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"status": status, "error": _WORDS.get(status, "error"), "detail": detail}, status)


def status_of(exc: StateStoreError) -> int:
    if isinstance(exc, StoreNotFoundError | KeyNotFoundError | KeyspaceMissingError):
        return 404
    if isinstance(exc, CassandraUnavailableError):
        return 503
    if isinstance(exc, StoredDataError):
        return 500
    return 400


def answer(exc: StateStoreError | Exception) -> JSONResponse:
    """The answer to a library error (its own status) or a driver error (503)."""
    if isinstance(exc, StateStoreError):
        return error(status_of(exc), str(exc))
    return error(503, f"Cassandra did not answer ({type(exc).__name__}: {exc}); retry once it is reachable")
