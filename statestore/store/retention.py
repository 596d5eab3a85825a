"""A store's retention at read time: where each read of a key-value or versioned store cuts.

The rule is statestore.core.retention's (entries dated before stream time - retention are
absent); here is where a reader finds the two times it needs. The retention comes with the
store's spec, read when the store is opened (a reader opened before `set_retention` sees the
change once it opens the store again; the HTTP API re-reads its stores every few seconds). The
stream time is read from the registry at each read (beside the entry's own query: a get waits
for no extra round trip), and a reader never shows an entry the stream has already
passed. A store without a retention costs nothing: no read of the registry.

`ReadHorizon.ttl_s` lets a reader with a read cache reuse the stream time for as long as it
trusts its cached values: such a reader is up to that long behind the store anyway.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.conn.aio import first_row
from statestore.core.errors import OptionError
from statestore.core.model import StoreSpec
from statestore.core.retention import check_retention, cutoff_ms
from statestore.store.book import registry


def _no_cutoff() -> None:
    return None


class ReadHorizon:
    """The cutoff of one store's reads (None: nothing is hidden)."""

    def __init__(self, session, spec: StoreSpec, profile: object = EXEC_PROFILE_DEFAULT, ttl_s: float = 0.0) -> None:
        self.session = session
        self.spec = spec
        self.profile = profile
        self.ttl_s = ttl_s
        self._known: tuple[float, int | None] | None = None  # (when read, stream time)

    @property
    def retention_ms(self) -> int | None:
        return self.spec.retention_ms

    def _fresh(self) -> tuple[bool, int | None]:
        known = self._known
        if known is not None and self.ttl_s > 0 and time.monotonic() - known[0] < self.ttl_s:
            return True, known[1]
        return False, None

    def _keep(self, stream_time: int | None) -> int | None:
        self._known = (time.monotonic(), stream_time)
        return cutoff_ms(self.retention_ms, stream_time)

    def cutoff(self) -> int | None:
        """Stream time - retention, the stream time read now (no read without a retention)."""
        if self.retention_ms is None:
            return None
        fresh, stream_time = self._fresh()
        if fresh:
            return cutoff_ms(self.retention_ms, stream_time)
        select, params = registry.stream_time_query(self.session, self.spec.keyspace, self.spec.name)
        row = self.session.execute(select, params, execution_profile=self.profile).one()
        return self._keep(registry.stream_time_of(row))

    def pending(self) -> Callable[[], int | None]:
        """`cutoff`, with the registry read started now and waited for when the returned
        function is called: a get reads its entry meanwhile, so the two queries overlap."""
        if self.retention_ms is None:
            return _no_cutoff
        fresh, stream_time = self._fresh()
        if fresh:
            known = cutoff_ms(self.retention_ms, stream_time)
            return lambda: known
        select, params = registry.stream_time_query(self.session, self.spec.keyspace, self.spec.name)
        future = self.session.execute_async(select, params, execution_profile=self.profile)
        return lambda: self._keep(registry.stream_time_of(future.result().one()))

    async def cutoff_async(self) -> int | None:
        """`cutoff` for an asyncio caller: the registry read awaited, never blocking the loop.
        The statement is prepared by `prepare` (called where blocking is fine)."""
        if self.retention_ms is None:
            return None
        fresh, stream_time = self._fresh()
        if fresh:
            return cutoff_ms(self.retention_ms, stream_time)
        query = registry.stream_time_query(self.session, self.spec.keyspace, self.spec.name)
        return self._keep(registry.stream_time_of(await first_row(self.session, query, self.profile)))

    def prepare(self) -> None:
        """Prepare the stream-time read now (a blocking round trip), for `cutoff_async`."""
        if self.retention_ms is not None:
            registry.stream_time_query(self.session, self.spec.keyspace, self.spec.name)


def set_retention(session, keyspace: str, name: str, retention_ms: int | None) -> StoreSpec:
    """Give a key-value or versioned store a retention (None: take it away); returns the store
    as now registered. Refused for window and session stores (their windowing has its own
    retention) and for anything but a positive number of milliseconds. Takes effect for the
    stream at its next batch and for readers as they open the store (see the module doc)."""
    spec = registry.lookup(session, keyspace, name)
    if spec.store_type.timed:
        raise OptionError(
            f"store '{name}' is a {spec.store_type.value} store: it expires by its windowing's own retention "
            f"({spec.windowing.summary()}), not by a store retention"
        )
    try:
        check_retention(retention_ms)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    registry.record_retention(session, keyspace, name, retention_ms)
    return registry.lookup(session, keyspace, name)
