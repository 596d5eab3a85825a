"""Point gets that arrive together are read together.

Under concurrent load most of a point get's cost is per Cassandra request, on both sides. The
gets of one key-value store that reach the event loop in the same turn (the requests whose bytes
arrived together) join one read: `KeyValueStore.get_many_async`, one `key IN` query per store
partition. A lone get is still one query for one key, so a single client sees no difference.

The rule it keeps: each get keeps its own answer and its own error; a failed read fails the gets
it carried, and only those.
"""

from __future__ import annotations

import asyncio
from typing import Any


class GetCoalescer:
    """Joins the point gets of one store handle made in one turn of the event loop."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self._pending: list[tuple[Any, asyncio.Future]] = []
        self._reads: set[asyncio.Future] = set()

    async def get(self, key: Any) -> Any | None:
        # A key that cannot be stored fails its own request here, never the read it would join.
        self.handle.encode_key(key)
        loop = asyncio.get_running_loop()
        answer = loop.create_future()
        if not self._pending:
            # Runs after the callbacks already queued: the other requests of this turn.
            loop.call_soon(self._flush)
        self._pending.append((key, answer))
        return await answer

    def _flush(self) -> None:
        taken, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._read_together([key for key, _ in taken]))
        self._reads.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._reads.discard)
        task.add_done_callback(lambda done: _settle(taken, done))

    async def _read_together(self, keys: list[Any]) -> list[Any | None]:
        if len(keys) == 1:  # a lone get stays a single-key query
            return [await self.handle.get_async(keys[0])]
        return await self.handle.get_many_async(keys)


def _settle(taken: list[tuple[Any, asyncio.Future]], read: asyncio.Future) -> None:
    """Each get of a finished read gets its value, or the read's error."""
    error = None if read.cancelled() else read.exception()
    values = read.result() if not read.cancelled() and error is None else [None] * len(taken)
    for (_, answer), value in zip(taken, values, strict=True):
        if answer.done():  # its client has gone
            continue
        if read.cancelled():
            answer.cancel()
        elif error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(value)
