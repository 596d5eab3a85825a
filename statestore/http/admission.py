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
visible) and any upgrade. The answer keeps the connection as uvicorn would (closed for HTTP/1.0
and `Connection: close`), and closes it on a client that has stopped reading its answers; a
HEAD request gets the answer's head alone. A shed request is counted (`on_shed`) but, answered
before the ASGI app, is neither in the request-duration metrics nor in the access log.
"""

from __future__ import annotations

from collections.abc import Callable

from statestore.http.shedding import NEVER_SHED, SHED_BODY, ShedLimits

_NEVER_SHED = tuple(path.encode() for path in NEVER_SHED)


def shed_answer(retry_after_s: int, keep_alive: bool, body: bool = True) -> bytes:
    """The whole 503 answer, status line to body, as sent on the connection (`body` False: a
    HEAD request's, the same head without the body)."""
    head = [
        b"HTTP/1.1 503 Service Unavailable",
        b"content-type: application/json",
        b"content-length: " + str(len(SHED_BODY)).encode(),
        b"retry-after: " + str(retry_after_s).encode(),
    ]
    if not keep_alive:
        head.append(b"connection: close")
    return b"\r\n".join(head) + b"\r\n\r\n" + (SHED_BODY if body else b"")


def admission_protocol(limits: ShedLimits, on_shed: Callable[[], None] = lambda: None) -> type | None:
    """uvicorn's httptools protocol shedding at admission under `limits` (pass it as uvicorn's
    `http`); None when httptools is not installed (uvicorn then uses its own, and the
    middleware sheds)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None
    room = limits.max_active + limits.max_queue
    answers = {
        (keep_alive, body): shed_answer(limits.retry_after_s, keep_alive, body)
        for keep_alive in (True, False)
        for body in (True, False)
    }

    class AdmissionProtocol(HttpToolsProtocol):
        shedding = False  # the request being parsed was shed: its body and end are not the cycle's

        def on_headers_complete(self) -> None:
            self.shedding = (
                len(self.tasks) >= room
                and (self.cycle is None or self.cycle.response_complete)
                and self.url.split(b"?", 1)[0] not in _NEVER_SHED
                and not self.parser.should_upgrade()
            )
            if not self.shedding:
                # A shed request before this one in the same read armed the idle timer: not for
                # a request being served (uvicorn arms it again once this one is answered).
                self._unset_keepalive_if_required()
                super().on_headers_complete()
                return
            on_shed()
            self.server_state.total_requests += 1
            # As uvicorn decides it; and a client that does not read its answers is closed on,
            # so the 503s it does not read do not pile up in the server's write buffer.
            keep_alive = (
                self.parser.get_http_version() != "1.0"
                and self.parser.should_keep_alive()
                and not self.flow.write_paused
            )
            self.transport.write(answers[keep_alive, self.parser.get_method() != b"HEAD"])
            if not keep_alive:
                self.transport.close()

        def on_body(self, body: bytes) -> None:
            if not self.shedding:
                super().on_body(body)

        def on_message_complete(self) -> None:
            if not self.shedding:
                super().on_message_complete()
                return
            if not self.transport.is_closing():  # idle now, as after an answer: the keep-alive timer
                self._unset_keepalive_if_required()
                idle = self.timeout_keep_alive_handler
                self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, idle)

    return AdmissionProtocol
