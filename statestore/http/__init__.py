"""The read-only HTTP API (FastAPI): `create_app()` builds it without I/O; `statestore serve` runs it."""

from statestore.http.app import create_app

__all__ = ["create_app"]
