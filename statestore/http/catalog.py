"""The stores an API process serves: one lazily connected session, store handles kept warm.

Nothing here touches the network until the first request asks for a store. Opening a store
reads its registry row; the handle is then reused (a point get is one query, and the read
cache, if on, lives in the handle) and checked against the registry again every
`recheck_s` seconds, so a store dropped and recreated with another layout is picked up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from statestore.conn.cassandra import session_for
from statestore.core.config import CassandraConfig, resolve
from statestore.core.errors import StoreNotFoundError
from statestore.core.names import validate_store_name
from statestore.store.builder import open_session_store, open_store, open_window_store
from statestore.store.cache import CacheOptions

ConfigSource = CassandraConfig | Callable[[], CassandraConfig] | None


class StoreCatalog:
    def __init__(self, cassandra: ConfigSource = None, cache: CacheOptions | None = None, recheck_s: float = 5.0):
        self._source = cassandra
        self._config: CassandraConfig | None = cassandra if isinstance(cassandra, CassandraConfig) else None
        self.cache = cache
        self.recheck_s = recheck_s
        self._stores: dict[str, tuple[object, float]] = {}
        self._lock = threading.Lock()

    @property
    def config(self) -> CassandraConfig:
        if self._config is None:
            # Resolved on first use, not at app creation: an Airflow plugin mounts the app at import.
            self._config = self._source() if callable(self._source) else resolve(CassandraConfig)
        return self._config

    @property
    def keyspace(self) -> str:
        return self.config.keyspace

    def session(self):
        """The process-wide session (connects on first use; CassandraUnavailableError if it cannot)."""
        return session_for(self.config)

    def warm(self, name: str):
        """The open handle of `name` if it was checked recently, else None: never any I/O."""
        with self._lock:
            cached = self._stores.get(name)
        if cached is None or time.monotonic() - cached[1] >= self.recheck_s:
            return None
        return cached[0]

    def store(self, name: str):
        """The KeyValueStore or VersionedStore named `name` (StoreNotFoundError if not registered)."""
        validate_store_name(name)
        now = time.monotonic()
        with self._lock:
            cached = self._stores.get(name)
        if cached is not None and now - cached[1] < self.recheck_s:
            return cached[0]
        try:
            store = open_store(self.session(), self.keyspace, name, cache=self.cache)
        except StoreNotFoundError:
            self.forget(name)
            raise
        if cached is not None and cached[0].spec == store.spec:
            store = cached[0]  # unchanged: keep the warm handle and its read cache
        # Here, in a route's worker thread: the point-get fast path awaits reads on the event
        # loop, where preparing a statement would block every other request.
        store.prepare_point_get()
        with self._lock:
            self._stores[name] = (store, now)
        return store

    def window_store(self, name: str):
        """The WindowStore named `name`, opened from its registry row on each call (window reads
        are scans, so the registry read is small beside them)."""
        validate_store_name(name)
        return open_window_store(self.session(), self.keyspace, name)

    def session_store(self, name: str):
        """The SessionStore named `name`, opened like window_store."""
        validate_store_name(name)
        return open_session_store(self.session(), self.keyspace, name)

    def forget(self, name: str) -> None:
        with self._lock:
            self._stores.pop(name, None)
