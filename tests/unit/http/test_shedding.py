"""Load shedding: at most max_active requests run, max_queue wait in arrival order, and the
rest are answered 503 with Retry-After at once, without reaching the app; /metrics is never shed."""

from __future__ import annotations

import asyncio
import json

import pytest

from statestore.core.errors import OptionError
from statestore.http.shedding import LoadShedder, ShedLimits


class GatedApp:
    """An ASGI app whose requests each wait for the test to let them through."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.gate = asyncio.Event()

    async def __call__(self, scope, receive, send):
        self.entered.append(scope["path"])
        await self.gate.wait()
        body = scope["path"].encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})


async def _request(app, path: str) -> dict:
    answer: dict = {"headers": {}}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = dict(message["headers"])
        else:
            answer["body"] = message.get("body", b"")

    scope = {"type": "http", "method": "GET", "path": path, "root_path": "", "query_string": b"", "headers": []}
    await app(scope, receive, send)
    return answer


async def _one_slot_taken(max_queue: int) -> tuple[GatedApp, LoadShedder, asyncio.Task]:
    """A shedder with one slot, held by a request the gated app has not let through yet."""
    inner = GatedApp()
    app = LoadShedder(inner, ShedLimits(max_active=1, max_queue=max_queue))
    busy = asyncio.create_task(_request(app, "/stores/s/keys/a"))
    await asyncio.sleep(0.01)
    return inner, app, busy


def test_beyond_the_slots_and_the_queue_requests_are_shed_at_once():
    async def scenario():
        inner = GatedApp()
        shed = []
        app = LoadShedder(inner, ShedLimits(max_active=2, max_queue=1, retry_after_s=3), on_shed=lambda: shed.append(1))
        tasks = [asyncio.create_task(_request(app, f"/stores/s/keys/k{i}")) for i in range(5)]
        await asyncio.sleep(0.05)
        # Two run, one waits, two are already answered without reaching the app.
        assert inner.entered == ["/stores/s/keys/k0", "/stores/s/keys/k1"]
        assert app.waiting == 1
        done = [t for t in tasks if t.done()]
        assert len(done) == 2 and len(shed) == 2
        for task in done:
            answer = task.result()
            assert answer["status"] == 503
            assert answer["headers"][b"retry-after"] == b"3"
            body = json.loads(answer["body"])
            assert body["status"] == 503 and "overloaded" in body["detail"] and "--workers" in body["detail"]
        inner.gate.set()
        answers = await asyncio.gather(*tasks)
        # The waiting request got its slot once one was released, and was served.
        assert inner.entered[2] == "/stores/s/keys/k2"
        assert [a["status"] for a in answers].count(200) == 3
        assert app.waiting == 0

    asyncio.run(scenario())


def test_with_no_queue_a_request_is_shed_as_soon_as_every_slot_is_busy():
    async def scenario():
        inner, app, first = await _one_slot_taken(max_queue=0)
        second = await _request(app, "/stores/s/keys/b")
        assert second["status"] == 503
        inner.gate.set()
        assert (await first)["status"] == 200
        # The slot is free again: the next request is served.
        assert (await _request(app, "/stores/s/keys/c"))["status"] == 200

    asyncio.run(scenario())


def test_metrics_are_never_shed():
    async def scenario():
        inner, app, busy = await _one_slot_taken(max_queue=0)
        scrape = asyncio.create_task(_request(app, "/metrics"))
        await asyncio.sleep(0.01)
        assert inner.entered == ["/stores/s/keys/a", "/metrics"]
        inner.gate.set()
        assert (await scrape)["status"] == 200 and (await busy)["status"] == 200

    asyncio.run(scenario())


def test_a_waiting_request_whose_client_left_gives_its_place_back():
    async def scenario():
        inner, app, busy = await _one_slot_taken(max_queue=1)
        waiting = asyncio.create_task(_request(app, "/stores/s/keys/b"))
        await asyncio.sleep(0.01)
        assert app.waiting == 1
        waiting.cancel()
        await asyncio.sleep(0.01)
        assert app.waiting == 0
        inner.gate.set()
        assert (await busy)["status"] == 200
        assert (await _request(app, "/stores/s/keys/c"))["status"] == 200

    asyncio.run(scenario())


@pytest.mark.parametrize("limits", [{"max_active": 0}, {"max_queue": -1}, {"retry_after_s": 0}])
def test_limits_that_admit_nothing_are_refused(limits):
    with pytest.raises(OptionError, match="shed limits"):
        ShedLimits(**limits)
