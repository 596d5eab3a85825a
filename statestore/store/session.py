"""Session stores with codecs: the operations of Kafka Streams' SessionStore over a
partitioned-session store (statestore.store.tables.partitioned_session).

A session is [start, end], both inclusive (Kafka Streams' SessionWindow). Retention holds at
read time as in the window store: a session that ended `retention` or more before the store's
stream time (the registry's `max_event_time`; `stream_time_ms=` overrides) is never returned,
and a put of such a session is dropped. Constructing a store does no I/O; `create()` is the
schema step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.conn.cassandra import DDL_PROFILE
from statestore.core.codecs import Codec, decode_stored, millis_of
from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import EVERYTHING, KeyRange, SessionEntry, StoreSpec, check_key, check_value
from statestore.core.options import TableOptions
from statestore.store.book import registry
from statestore.store.provision import provision_store
from statestore.store.table_stats import rows_estimate
from statestore.store.tables import session_table_for
from statestore.store.tables.partitioned_session import SessionChange

_NO_STREAM_TIME = object()
_SAMPLE_ROWS = 200
# Bytes a session row holds besides its key and value: its two times, batch_id, time, headers.
_ROW_OVERHEAD = 48


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


class SessionStore:
    """find_sessions / fetch / remove / put / all / drop_expired over one session store."""

    def __init__(
        self,
        session,
        spec: StoreSpec,
        key_codec: Codec,
        value_codec: Codec,
        *,
        table_options: TableOptions | None = None,
        dml_profile: object = EXEC_PROFILE_DEFAULT,
        ddl_profile: object = DDL_PROFILE,
    ) -> None:
        if not spec.store_type.sessioned:
            raise UnsupportedOperationError(f"store '{spec.name}' is {spec.store_type.value}: it holds no sessions")
        self.session = session
        self.spec = spec
        self.sessions = spec.windowing
        self.key_codec = key_codec
        self.value_codec = value_codec
        self.table = session_table_for(spec, dml_profile)
        self.table_options = table_options
        self.ddl_profile = ddl_profile

    @property
    def name(self) -> str:
        return self.spec.name

    def create(self) -> SessionStore:
        """The schema step: register the store and create its table (TWCS by default)."""
        provision_store(
            self.session, self.spec, options=self.table_options, dead_letters=False, ddl_profile=self.ddl_profile
        )
        return self

    def stream_time(self) -> int | None:
        moment = registry.progress(self.session, self.spec.keyspace, self.spec.name).max_event_time
        return None if moment is None else millis_of(moment)

    # -- writes ----------------------------------------------------------------------------------

    def put(self, session: SessionKey | SessionValue, value: Any, *, stream_time_ms: Any = _NO_STREAM_TIME) -> bool:
        """Set the value of `session` (None removes it). Returns False, writing nothing, for an
        expired session."""
        start, end = _bounds(session.start_ms, session.end_ms)
        if self.sessions.expired(end, self._now(stream_time_ms)):
            return False
        if value is None:
            self.remove(session)
            return True
        raw = check_key(self.key_codec.encode(session.key))
        data = check_value(self.value_codec.encode(value), self.name)
        self.table.apply(self.session, [SessionChange((), (SessionEntry(raw, start, end, data),))], 1, None)
        return True

    def remove(self, session: SessionKey | SessionValue) -> None:
        start, end = _bounds(session.start_ms, session.end_ms)
        raw = check_key(self.key_codec.encode(session.key))
        self.table.apply(self.session, [SessionChange((SessionEntry(raw, start, end, b""),), ())], 1, None)

    def drop_expired(self, stream_time_ms: Any = _NO_STREAM_TIME) -> list[int]:
        """Drop every segment that holds only expired sessions; returns the segments dropped."""
        doomed = self.sessions.expired_segments(self.table.segments(self.session), self._now(stream_time_ms))
        for segment in doomed:
            self.table.drop_segment(self.session, segment)
        return doomed

    # -- reads -----------------------------------------------------------------------------------

    def find_sessions(
        self, key: Any, earliest_end: int, latest_start: int, *, stream_time_ms: Any = _NO_STREAM_TIME
    ) -> list[SessionValue]:
        """`key`'s retained sessions that end at or after `earliest_end` and start at or before
        `latest_start` (Kafka Streams' findSessions), by end then start."""
        raw = check_key(self.key_codec.encode(key))
        low = self._retained_end(earliest_end, self._now(stream_time_ms))
        segments = self.live_segments(low)
        return [self.decode(e) for e in self.table.find(self.session, raw, segments, low, latest_start)]

    def fetch(self, key: Any, **kwargs) -> list[SessionValue]:
        """Every retained session of `key`, by end then start."""
        return self.find_sessions(key, 0, 2**63 - 1, **kwargs)

    def all(self, *, stream_time_ms: Any = _NO_STREAM_TIME) -> Iterator[SessionValue]:
        """Every retained session of every key, by key bytes, then end, then start."""
        return map(self.decode, self.raw_sessions(EVERYTHING, stream_time_ms=stream_time_ms))

    def raw_sessions(self, key_range: KeyRange, *, stream_time_ms: Any = _NO_STREAM_TIME) -> Iterator[SessionEntry]:
        """The stored rows of keys in `key_range` (encoded bytes), retention applied."""
        low = self._retained_end(0, self._now(stream_time_ms))
        rows = self.table.scan(self.session, self.live_segments(low), key_range)
        return (row for row in rows if row.end_ms >= low)

    def approximate_num_entries(self) -> int:
        """Sessions stored (expired ones until their segment is dropped), estimated as the
        key-value store does (statestore.store.table_stats.rows_estimate)."""
        sample = list(islice(self.raw_sessions(EVERYTHING, stream_time_ms=None), _SAMPLE_ROWS))
        return rows_estimate(self.session, self.spec.keyspace, self.spec.table, sample, _ROW_OVERHEAD)

    def live_segments(self, earliest_end: int) -> list[int]:
        """The segments that may hold a session ending at or after `earliest_end`: those the
        table has (a scan of its partition keys), from that end's on."""
        first = self.sessions.segment_of(earliest_end)
        return [s for s in self.table.segments(self.session) if s >= first]

    def decode(self, entry: SessionEntry) -> SessionValue:
        key = decode_stored(self.key_codec, entry.key, self.name, "key")
        return SessionValue(key, entry.start_ms, entry.end_ms, decode_stored(self.value_codec, entry.value, self.name))

    # -- the pieces ------------------------------------------------------------------------------

    def _now(self, stream_time_ms: Any) -> int | None:
        return self.stream_time() if stream_time_ms is _NO_STREAM_TIME else stream_time_ms

    def _retained_end(self, earliest_end: int, now: int | None) -> int:
        """The earliest end a read may return: sessions ending at or before now - retention are expired."""
        low = max(0, earliest_end)
        return low if now is None else max(low, now - self.sessions.retention_ms + 1)


def _bounds(start_ms: int, end_ms: int) -> tuple[int, int]:
    for value in (start_ms, end_ms):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"a session starts and ends at epoch milliseconds of 0 or more, got {value!r}")
    if end_ms < start_ms:
        raise ValueError(f"a session cannot end ({end_ms}) before it starts ({start_ms})")
    return start_ms, end_ms
