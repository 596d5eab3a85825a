"""Load shedding: an overloaded API answers 503 at once instead of letting every wait grow.

Each worker serves at most `max_active` requests at a time; up to `max_queue` more wait, in
arrival order, for a slot; any request beyond those is answered 503 with `Retry-After` before
anything is read (no Cassandra query, no parsing of the key), and the requests that are
admitted keep a bounded latency: at worst the queue's length times
the time a slot takes. `/metrics` is never shed, so an overload stays visible.

Under `statestore serve` most shedding happens before this middleware, in the connection
protocol (statestore.http.admission), with the same limits; this middleware keeps the order of
who waits and sheds for the apps that run without that protocol (mounted in Airflow's API
server, or under another ASGI server).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from statestore.core.errors import OptionError
from statestore.http.paths import app_path

NEVER_SHED = ("/metrics",)
# The app's ErrorBody, made once: a shed request must cost next to nothing.
SHED_BODY = json.dumps(
    {
        "status": 503,
        "error": "unavailable",
        "detail": "the API is overloaded (every slot busy and the queue full); "
        "retry after the seconds in Retry-After, or run it with more --workers",
    }
).encode()


@dataclass(frozen=True)
class ShedLimits:
    """max_active: requests served at once per worker; max_queue: requests waiting for a slot
    (0: none wait); retry_after_s: what a shed request is told."""

    max_active: int = 32
    max_queue: int = 224
    retry_after_s: int = 1

    def __post_init__(self) -> None:
        if self.max_active < 1 or self.max_queue < 0 or self.retry_after_s < 1:
            raise OptionError(f"shed limits need max_active >= 1, max_queue >= 0 and retry_after_s >= 1, got {self}")


class LoadShedder:
    """ASGI middleware admitting requests under ShedLimits; `on_shed()` is called per 503."""

    def __init__(self, app: ASGIApp, limits: ShedLimits, on_shed: Callable[[], None] = lambda: None) -> None:
        self.app = app
        self.limits = limits
        self.on_shed = on_shed
        # Made on the first request, inside the server's event loop.
        self._slots: asyncio.Semaphore | None = None
        self.waiting = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or app_path(scope) in NEVER_SHED:
            await self.app(scope, receive, send)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limits.max_active)
        slots = self._slots
        if slots.locked() and self.waiting >= self.limits.max_queue:
            self.on_shed()
            await _shed(send, self.limits.retry_after_s)
            return
        self.waiting += 1
        try:
            await slots.acquire()
        finally:
            self.waiting -= 1
        try:
            await self.app(scope, receive, send)
        finally:
            slots.release()


async def _shed(send: Send, retry_after_s: int) -> None:
    body = SHED_BODY
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(retry_after_s).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
