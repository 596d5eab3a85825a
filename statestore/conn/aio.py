"""The Cassandra driver's futures as asyncio awaitables, for the HTTP API's event loop."""

from __future__ import annotations

import asyncio


def _settle(future: asyncio.Future, value=None, error: BaseException | None = None) -> None:
    if future.done():  # the request was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def awaitable(response_future) -> asyncio.Future:
    """An asyncio future for a driver ResponseFuture: its first page of rows, or its error.

    The driver completes it on its own I/O thread; the result is handed to the loop with
    call_soon_threadsafe, so awaiting it costs no worker thread (unlike run_in_threadpool).
    """
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    response_future.add_callbacks(
        lambda rows: loop.call_soon_threadsafe(_settle, done, rows),
        errback=lambda exc: loop.call_soon_threadsafe(_settle, done, None, exc),
    )
    return done


async def first_row(session, query: tuple, profile):
    """The first row `query` (statement, parameters) reads, or None, awaited without a thread."""
    rows = await rows_of(session, query, profile)
    return rows[0] if rows else None


async def rows_of(session, query: tuple, profile) -> list:
    """Every row `query` (statement, parameters) reads, awaited without a thread. Only for
    queries whose rows fit in one page (the driver's fetch size, 5000 by default)."""
    rows = await awaitable(session.execute_async(*query, execution_profile=profile))
    return list(rows)
