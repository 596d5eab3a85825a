"""How `statestore serve` serves the query API: address, worker processes, read cache, and the
load it admits before it sheds.

A frozen dataclass on the same precedence chain as every other setting (defaults <
STATESTORE_HTTP_* environment < flags), so the worker processes of `--workers N` resolve
exactly what the command line gave the parent (statestore.http.serve hands it over through
the environment).
"""

from __future__ import annotations

from dataclasses import dataclass

from statestore.core.settings import parse_port, parse_positive_float, parse_positive_int, setting


def _count(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


@dataclass(frozen=True)
class ServeConfig:
    """HTTP API server."""

    http_host: str = setting("127.0.0.1", "STATESTORE_HTTP_HOST", "--host", "address to listen on (default 127.0.0.1)")
    http_port: int = setting(8080, "STATESTORE_HTTP_PORT", "--port", "TCP port (default 8080)", parse_port)
    workers: int = setting(
        1,
        "STATESTORE_HTTP_WORKERS",
        "--workers",
        "server processes sharing the port (default 1; about one per core the API may use)",
        parse_positive_int,
    )
    cache_entries: int = setting(
        0, "STATESTORE_HTTP_CACHE_ENTRIES", "--cache-entries", "read cache size per worker (default 0: off)", _count
    )
    cache_ttl_s: float = setting(
        1.0,
        "STATESTORE_HTTP_CACHE_TTL",
        "--cache-ttl",
        "how stale a cached read may be, in seconds (default 1)",
        parse_positive_float,
    )
    max_active: int = setting(
        32,
        "STATESTORE_HTTP_MAX_ACTIVE",
        "--max-active",
        "requests a worker serves at once (default 32); more wait in its queue",
        parse_positive_int,
    )
    max_queue: int = setting(
        224,
        "STATESTORE_HTTP_MAX_QUEUE",
        "--max-queue",
        "requests a worker lets wait for a slot (default 224); beyond it, 503 with Retry-After at once",
        _count,
    )
    retry_after_s: int = setting(
        1,
        "STATESTORE_HTTP_RETRY_AFTER",
        "--retry-after",
        "seconds a shed request is told to wait before trying again (default 1)",
        parse_positive_int,
    )
