"""Shedding at admission: `statestore serve` answers 503 to a request it has no room for as soon
as the request's head is parsed, in uvicorn's connection protocol, before any of the work a
request costs the event loop (its request-response cycle, an asyncio task, the middleware and
routing, the response's headers).

Under overload most requests are shed, so what each shed costs decides how much of the worker
is left to serve the ones it admits: answered by the ASGI middleware (statestore.http.shedding)
a shed request costs about a third of a served one; answered here, a few parser callbacks and
one write of a prepared answer. The room is uvicorn's own count of requests in flight (its ASGI
tasks, each removed when its request is done): at `max_active + max_queue` requests in flight,
the next is shed. The middleware keeps its own limits behind this (the order of who waits, and
the apps that run without this protocol: mounted in Airflow, or under another server).

Kept by this protocol: a pipelined request behind one still being answered goes to uvicorn (the
answers must keep the requests' order), as does `/metrics` (never shed, so an overload stays
visible) and any upgrade. A shed request is counted (`on_shed`) but, answered before the ASGI
app, is not in the request-duration metrics.
"""

from __future__ import annotations

from collections.abc import Callable

from statestore.http.shedding import NEVER_SHED, SHED_BODY, ShedLimits

_NEVER_SHED = tuple(path.encode() for path in NEVER_SHED)


def shed_answer(retry_after_s: int, keep_alive: bool) -> bytes:
    """The whole 503 answer, status line to body, as sent on the connection."""
    head = [
        b"HTTP/1.1 503 Service Unavailable",
        b"content-type: application/json",
        b"content-length: " + str(len(SHED_BODY)).encode(),
        b"retry-after: " + str(retry_after_s).encode(),
    ]
    if not keep_alive:
        head.append(b"connection: close")
    return b"\r\n".join(head) + b"\r\n\r\n" + SHED_BODY


def admission_protocol(limits: ShedLimits, on_shed: Callable[[], None] = lambda: None) -> type | None:
    """uvicorn's httptools protocol shedding at admission under `limits` (pass it as uvicorn's
    `http`); None when httptools is not installed (uvicorn then uses its own, and the
    middleware sheds)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None
    room = limits.max_active + limits.max_queue
    keep_open = shed_answer(limits.retry_after_s, keep_alive=True)
    closing = shed_answer(limits.retry_after_s, keep_alive=False)

    class AdmissionProtocol(HttpToolsProtocol):
        shedding = False  # the request being parsed was shed: its body and end are not the cycle's

        def on_headers_complete(self) -> None:
            self.shedding = (
                len(self.tasks) >= room
                and (self.cycle is None or self.cycle.response_complete)
                and not self.url.startswith(_NEVER_SHED)
                and not self.parser.should_upgrade()
            )
            if not self.shedding:
                super().on_headers_complete()
                return
            on_shed()
            self.server_state.total_requests += 1
            if not self.parser.should_keep_alive():
                self.transport.write(closing)
                self.transport.close()
                return
            self.transport.write(keep_open)
            if self.timeout_keep_alive_task is not None:
                self.timeout_keep_alive_task.cancel()
            idle = self.timeout_keep_alive_handler
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, idle)

        def on_body(self, body: bytes) -> None:
            if not self.shedding:
                super().on_body(body)

        def on_message_complete(self) -> None:
            if not self.shedding:
                super().on_message_complete()

    return AdmissionProtocol
