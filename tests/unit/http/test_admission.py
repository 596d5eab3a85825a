"""Shedding at admission (statestore.http.admission): a real uvicorn server on loopback with the
admission protocol and an app that holds its requests; a request beyond max_active + max_queue
in flight is answered 503 with Retry-After by the protocol, without reaching the app, on the
same keep-alive connection; /metrics is never shed; a closing request's connection is closed;
room again admits again."""

from __future__ import annotations

import asyncio
import socket

import uvicorn

from statestore.http.admission import admission_protocol, shed_answer
from statestore.http.shedding import ShedLimits
from tests.unit.http.test_shedding import GatedApp


async def _answer(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(_read_answer(reader), 5)  # an answer the app holds fails, not hangs


async def _read_answer(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length"))
    return head + await reader.readexactly(length)


def _get(path: str, *, close: bool = False) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: t\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n".encode()


async def _full_server(app: GatedApp, shed: list[int], **config) -> tuple[uvicorn.Server, asyncio.Task, int, list]:
    """A server with room for two requests in flight, both taken by held requests."""
    protocol = admission_protocol(ShedLimits(max_active=1, max_queue=1, retry_after_s=7), lambda: shed.append(1))
    assert protocol is not None
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, http=protocol, lifespan="off", log_level="warning", **config))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
    for _reader, writer in held:
        writer.write(_get("/stores/s/keys/held"))
    while len(app.entered) < 2:
        await asyncio.sleep(0.01)
    return server, serving, port, held


def test_requests_beyond_the_room_are_shed_by_the_protocol_before_the_app():
    async def scenario():
        app = GatedApp()
        shed: list[int] = []
        server, serving, port, held = await _full_server(app, shed)

        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(3):  # one keep-alive connection, shed three times
            writer.write(_get("/stores/s/keys/k"))
            assert await _answer(reader) == shed_answer(7, keep_alive=True)
        assert len(shed) == 3 and app.entered == ["/stores/s/keys/held"] * 2

        writer.write(_get("/metrics"))  # never shed: reaches the app although the room is full
        while len(app.entered) < 3:
            await asyncio.sleep(0.01)
        assert app.entered[-1] == "/metrics"

        closing_reader, closing_writer = await asyncio.open_connection("127.0.0.1", port)
        closing_writer.write(_get("/stores/s/keys/k", close=True))
        assert await closing_reader.read() == shed_answer(7, keep_alive=False)  # read() to EOF: closed

        app.gate.set()
        for held_reader, _writer in held:
            assert (await _answer(held_reader)).endswith(b"/stores/s/keys/held")
        assert (await _answer(reader)).endswith(b"/metrics")  # the /metrics answer, on the shed connection
        writer.write(_get("/stores/s/keys/k"))  # room again: admitted
        assert (await _answer(reader)).endswith(b"/stores/s/keys/k")
        assert app.entered[-1] == "/stores/s/keys/k" and len(shed) == 4

        for _reader, held_writer in [*held, (reader, writer)]:
            held_writer.close()
        server.should_exit = True
        await serving

    asyncio.run(scenario())


def test_the_shed_answer_is_a_complete_503_with_retry_after():
    answer = shed_answer(3, keep_alive=False)
    head, body = answer.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 503 Service Unavailable"
    assert b"retry-after: 3" in lines and b"connection: close" in lines
    assert f"content-length: {len(body)}".encode() in lines and b"overloaded" in body
    assert b"connection: close" not in shed_answer(3, keep_alive=True)


def test_a_shed_request_then_a_served_one_in_one_write_keep_the_connection_and_their_order():
    """Pipelined: a shed request's idle timer is not left running under the /metrics request
    behind it (held longer than the keep-alive timeout); HEAD gets the answer's head alone, so
    the answers after it still parse."""

    async def scenario():
        app = GatedApp()
        shed: list[int] = []
        server, serving, port, held = await _full_server(app, shed, timeout_keep_alive=1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"HEAD /stores/s/keys/k HTTP/1.1\r\nHost: t\r\n\r\n")
        assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == shed_answer(7, True, body=False)
        writer.write(_get("/stores/s/keys/k") + _get("/metrics"))
        assert await _answer(reader) == shed_answer(7, keep_alive=True)
        while "/metrics" not in app.entered:
            await asyncio.sleep(0.01)
        await asyncio.sleep(1.5)  # past the keep-alive timeout, /metrics still held
        app.gate.set()
        assert (await _answer(reader)).endswith(b"/metrics")  # the connection was kept for it
        assert len(shed) == 2
        for _reader, held_writer in [*held, (reader, writer)]:
            held_writer.close()
        server.should_exit = True
        await serving

    asyncio.run(scenario())
