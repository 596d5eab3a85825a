"""The opt-in read cache of the query side: bounded, with a time to live.

Off by default. A cached read can be up to `ttl_s` seconds behind the store: writes made
through the same store object update or evict their keys at once, but writes by the stream
or any other process are only seen once the cached entry expires. Misses (absent keys) are
cached too, so a hot missing key does not hit Cassandra on every read.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from cachetools import TTLCache

from statestore.core.errors import OptionError

_MISSING = object()


@dataclass(frozen=True)
class CacheOptions:
    """max_entries: how many keys are kept (least recently used go first); ttl_s: how stale a
    read may be, in seconds."""

    max_entries: int = 10_000
    ttl_s: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.max_entries, bool) or not isinstance(self.max_entries, int) or self.max_entries < 1:
            raise OptionError(f"cache max_entries must be a whole number of at least 1, got {self.max_entries!r}")
        if not isinstance(self.ttl_s, int | float) or not 0 < self.ttl_s <= 86_400:
            raise OptionError(f"cache ttl_s must be over 0 and at most 86400 seconds, got {self.ttl_s!r}")


class ReadCache:
    """Thread-safe key -> value-or-absent cache (the HTTP API serves from several threads)."""

    def __init__(self, options: CacheOptions) -> None:
        self.options = options
        self._entries: TTLCache = TTLCache(maxsize=options.max_entries, ttl=options.ttl_s)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def lookup(self, key: bytes):
        """(True, value-or-None) on a hit, (False, None) on a miss."""
        with self._lock:
            value = self._entries.get(key, _MISSING)
            if value is _MISSING:
                self.misses += 1
                return False, None
            self.hits += 1
            return True, value

    def store(self, key: bytes, value) -> None:
        with self._lock:
            self._entries[key] = value

    def evict(self, key: bytes) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
