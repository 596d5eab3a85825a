"""Point gets of one store made in the same turn of the event loop are read together; each
keeps its own answer (or the read's error), and a lone get is still a single-key read."""

from __future__ import annotations

import asyncio

import pytest

from statestore.http.coalesce import GetCoalescer


class FakeHandle:
    VERSIONED = False

    def __init__(self, values: dict, fail: Exception | None = None) -> None:
        self.values = values
        self.fail = fail
        self.single: list = []
        self.many: list[list] = []

    def encode_key(self, key):
        if key == "":
            raise ValueError("an empty key cannot be stored")
        return key.encode()

    async def get_async(self, key):
        self.single.append(key)
        await asyncio.sleep(0)
        if self.fail:
            raise self.fail
        return self.values.get(key)

    async def get_many_async(self, keys):
        self.many.append(list(keys))
        await asyncio.sleep(0)
        if self.fail:
            raise self.fail
        return [self.values.get(k) for k in keys]


def test_gets_of_one_turn_become_one_read_and_each_gets_its_own_value():
    async def scenario():
        handle = FakeHandle({"a": 1, "b": 2, "c": 3})
        coalescer = GetCoalescer(handle)
        answers = await asyncio.gather(*(coalescer.get(k) for k in ["a", "b", "zz", "c", "a"]))
        assert answers == [1, 2, None, 3, 1]
        assert handle.many == [["a", "b", "zz", "c", "a"]] and handle.single == []
        # The next turn starts a new read.
        assert await asyncio.gather(coalescer.get("b"), coalescer.get("c")) == [2, 3]
        assert len(handle.many) == 2

    asyncio.run(scenario())


def test_a_lone_get_reads_one_key():
    async def scenario():
        handle = FakeHandle({"a": 1})
        coalescer = GetCoalescer(handle)
        assert await coalescer.get("a") == 1
        assert await coalescer.get("nope") is None
        assert handle.single == ["a", "nope"] and handle.many == []

    asyncio.run(scenario())


def test_a_failed_read_fails_every_get_it_carried_and_no_other():
    async def scenario():
        handle = FakeHandle({"a": 1}, fail=ConnectionError("cassandra went away"))
        coalescer = GetCoalescer(handle)
        answers = await asyncio.gather(coalescer.get("a"), coalescer.get("b"), return_exceptions=True)
        assert all(isinstance(a, ConnectionError) for a in answers)
        handle.fail = None
        assert await asyncio.gather(coalescer.get("a"), coalescer.get("b")) == [1, None]

    asyncio.run(scenario())


def test_a_get_whose_client_left_does_not_disturb_the_others():
    async def scenario():
        handle = FakeHandle({"a": 1, "b": 2})
        coalescer = GetCoalescer(handle)
        first = asyncio.ensure_future(coalescer.get("a"))
        second = asyncio.ensure_future(coalescer.get("b"))
        await asyncio.sleep(0)  # both have joined the pending read
        first.cancel()
        assert await second == 2
        with pytest.raises(asyncio.CancelledError):
            await first

    asyncio.run(scenario())


def test_a_key_that_cannot_be_stored_fails_its_own_get_only():
    async def scenario():
        handle = FakeHandle({"a": 1, "b": 2})
        coalescer = GetCoalescer(handle)
        answers = await asyncio.gather(
            coalescer.get("a"), coalescer.get(""), coalescer.get("b"), return_exceptions=True
        )
        assert answers[0] == 1 and answers[2] == 2
        assert isinstance(answers[1], ValueError)
        assert handle.many == [["a", "b"]]

    asyncio.run(scenario())
