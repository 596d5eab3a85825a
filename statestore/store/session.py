"""Session stores with codecs: the operations of Kafka Streams' SessionStore over a
partitioned-session store (statestore.store.tables.partitioned_session).

A session is [start, end], both inclusive (Kafka Streams' SessionWindow). In the code, as in every
store, `session` is the Cassandra session; the store's SessionSpec is `windowing` and a key's
session `session_key`. The rule, as in the window store: retention holds at read time. A session
that ended `retention` or more before the store's stream time (the registry's `max_event_time`;
`stream_time_ms=` overrides) is never returned, and a put of such a session is dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import EVERYTHING, KeyRange, SessionEntry, StoreSpec
from statestore.store.handle import FROM_REGISTRY, TimedHandle
from statestore.store.tables import session_table_for
from statestore.store.tables.partitioned_session import SessionChange


@dataclass(frozen=True)
class SessionKey:
    """A key's session [start_ms, end_ms]: what put and remove take (a SessionValue does too)."""

    key: Any
    start_ms: int
    end_ms: int


@dataclass(frozen=True)
class SessionValue:
    """One session of one key, decoded: [start_ms, end_ms] and its value."""

    key: Any
    start_ms: int
    end_ms: int
    value: Any


class SessionStore(TimedHandle):
    """find_sessions / fetch / remove / put / all / drop_expired over one session store."""

    ROW_OVERHEAD = 48  # session_start, session_end, batch_id, time, cell headers

    def _open_table(self, spec: StoreSpec, profile: object):
        if not spec.store_type.sessioned:
            raise UnsupportedOperationError(f"store '{spec.name}' is {spec.store_type.value}: it holds no sessions")
        return session_table_for(spec, profile)

    # -- writes ----------------------------------------------------------------------------------

    def put(self, session_key: SessionKey | SessionValue, value: Any, *, stream_time_ms: Any = FROM_REGISTRY) -> bool:
        """Set the value of the session `session_key` names (None removes it). Returns False,
        writing nothing, for an expired session."""
        start, end = _bounds(session_key.start_ms, session_key.end_ms)
        if self.windowing.expired(end, self._now(stream_time_ms)):
            return False
        if value is None:
            self.remove(session_key)
            return True
        raw = self._key(session_key.key)
        data = self._value(value)
        self.table.apply(self.session, [SessionChange((), (SessionEntry(raw, start, end, data),))], 1, None)
        return True

    def remove(self, session_key: SessionKey | SessionValue) -> None:
        start, end = _bounds(session_key.start_ms, session_key.end_ms)
        raw = self._key(session_key.key)
        self.table.apply(self.session, [SessionChange((SessionEntry(raw, start, end, b""),), ())], 1, None)

    # -- reads -----------------------------------------------------------------------------------

    def find_sessions(
        self, key: Any, earliest_end: int, latest_start: int, *, stream_time_ms: Any = FROM_REGISTRY
    ) -> list[SessionValue]:
        """`key`'s retained sessions that end at or after `earliest_end` and start at or before
        `latest_start` (Kafka Streams' findSessions), by end then start."""
        raw = self._key(key)
        low = self._retained_end(earliest_end, self._now(stream_time_ms))
        segments = self.live_segments(low)
        return [self.decode(e) for e in self.table.find(self.session, raw, segments, low, latest_start)]

    def fetch(self, key: Any, **kwargs) -> list[SessionValue]:
        """Every retained session of `key`, by end then start."""
        return self.find_sessions(key, 0, 2**63 - 1, **kwargs)

    def all(self, *, stream_time_ms: Any = FROM_REGISTRY) -> Iterator[SessionValue]:
        """Every retained session of every key, by key bytes, then end, then start."""
        return map(self.decode, self.raw_sessions(EVERYTHING, stream_time_ms=stream_time_ms))

    def raw_sessions(self, key_range: KeyRange, *, stream_time_ms: Any = FROM_REGISTRY) -> Iterator[SessionEntry]:
        """The stored rows of keys in `key_range` (encoded bytes), retention applied."""
        low = self._retained_end(0, self._now(stream_time_ms))
        rows = self.table.scan(self.session, self.live_segments(low), key_range)
        return (row for row in rows if row.end_ms >= low)

    def count_entries(self) -> int:
        """Sessions, retention applied, exactly: reads every row of the store."""
        return sum(1 for _ in self.raw_sessions(EVERYTHING))

    def live_segments(self, earliest_end: int) -> list[int]:
        """The segments that may hold a session ending at or after `earliest_end`: those the
        table has (a scan of its partition keys), from that end's on."""
        first = self.windowing.segment_of(earliest_end)
        return [s for s in self.table.segments(self.session) if s >= first]

    def decode(self, entry: SessionEntry) -> SessionValue:
        key, value = self._decode_key(entry.key), self._decode_value(entry.value)
        return SessionValue(key, entry.start_ms, entry.end_ms, value)

    # -- the pieces ------------------------------------------------------------------------------

    def _retained_end(self, earliest_end: int, now: int | None) -> int:
        """The earliest end a read may return: sessions ending at or before now - retention are expired."""
        low = max(0, earliest_end)
        return low if now is None else max(low, now - self.windowing.retention_ms + 1)

    def _stored_rows(self) -> Iterator[SessionEntry]:
        return self.raw_sessions(EVERYTHING, stream_time_ms=None)


def _bounds(start_ms: int, end_ms: int) -> tuple[int, int]:
    for value in (start_ms, end_ms):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"a session starts and ends at epoch milliseconds of 0 or more, got {value!r}")
    if end_ms < start_ms:
        raise ValueError(f"a session cannot end ({end_ms}) before it starts ({start_ms})")
    return start_ms, end_ms
