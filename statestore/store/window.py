"""Window stores with codecs: the operations of Kafka Streams' WindowStore and
ReadOnlyWindowStore over a partitioned-window store (statestore.store.tables.partitioned_window).

Retention holds at read time: a window that started `retention` or more before the store's
stream time is never returned, even before its segment is dropped (`drop_expired`), and a put
into such a window is dropped, as in Kafka Streams. The stream time is the registry's
`max_event_time`, the largest event time of the batches the stream applied; a store written
only through this API has none until given one (`stream_time_ms=`), so nothing expires there.
Constructing a store does no I/O; `create()` is the schema step.
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
from statestore.core.model import EVERYTHING, KeyRange, StoreSpec, WindowedEntry, check_key, check_value
from statestore.core.options import TableOptions
from statestore.store.book import registry
from statestore.store.provision import provision_store
from statestore.store.table_stats import rows_estimate
from statestore.store.tables import window_table_for

# Beyond this many segments in a fetch's time span, ask the table which segments exist
# (one scan of its partition keys) instead of querying every one in turn.
_SEGMENTS_TO_PROBE = 64
_NO_STREAM_TIME = object()


_SAMPLE_ROWS = 200
# Bytes a window row holds besides its key and value: window_start, batch_id, time, cell headers.
_ROW_OVERHEAD = 40


@dataclass(frozen=True)
class WindowedValue:
    """One window of one key, decoded: [start_ms, end_ms) and the value counted in it."""

    key: Any
    start_ms: int
    end_ms: int
    value: Any


class WindowStore:
    """put / fetch / backward_fetch / fetch_range / backward_fetch_range / fetch_all /
    backward_fetch_all / all / backward_all / remove / drop_expired over one window store."""

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
        if not spec.store_type.windowed:
            raise UnsupportedOperationError(
                f"store '{spec.name}' is {spec.store_type.value}: open it as a key-value or versioned store"
            )
        self.session = session
        self.spec = spec
        self.windowing = spec.windowing
        self.key_codec = key_codec
        self.value_codec = value_codec
        self.table = window_table_for(spec, dml_profile)
        self.table_options = table_options
        self.ddl_profile = ddl_profile

    @property
    def name(self) -> str:
        return self.spec.name

    def create(self) -> WindowStore:
        """The schema step: register the store and create its table (TWCS by default)."""
        provision_store(
            self.session, self.spec, options=self.table_options, dead_letters=False, ddl_profile=self.ddl_profile
        )
        return self

    def stream_time(self) -> int | None:
        """The store's stream time (epoch ms): the largest event time the stream applied."""
        moment = registry.progress(self.session, self.spec.keyspace, self.spec.name).max_event_time
        return None if moment is None else millis_of(moment)

    # -- writes ----------------------------------------------------------------------------------

    def put(self, key: Any, value: Any, window_start: int, *, stream_time_ms: Any = _NO_STREAM_TIME) -> bool:
        """Set `key`'s value in the window starting at `window_start` (None deletes it).
        Returns False, writing nothing, when that window is past retention."""
        start = self._start(window_start)
        if self.windowing.expired(start, self._now(stream_time_ms)):
            return False
        raw = check_key(self.key_codec.encode(key))
        if value is None:
            self.table.delete(self.session, raw, start)
        else:
            data = check_value(self.value_codec.encode(value), self.name)
            self.table.write(self.session, [WindowedEntry(raw, start, data)], 1, None)
        return True

    def remove(self, key: Any, window_start: int) -> None:
        self.table.delete(self.session, check_key(self.key_codec.encode(key)), self._start(window_start))

    def drop_expired(self, stream_time_ms: Any = _NO_STREAM_TIME) -> list[int]:
        """Drop every segment that holds only expired windows; returns the segments dropped."""
        doomed = self.windowing.expired_segments(self.table.segments(self.session), self._now(stream_time_ms))
        for segment in doomed:
            self.table.drop_segment(self.session, segment)
        return doomed

    # -- reads -----------------------------------------------------------------------------------

    def fetch(
        self, key: Any, time_from: int, time_to: int | None = None, *, stream_time_ms: Any = _NO_STREAM_TIME
    ) -> Any | list[tuple[int, Any]]:
        """With one time: the value of `key`'s window starting at `time_from` (None: absent or
        expired). With two: [(window start, value)] of `key`'s windows starting in
        [time_from, time_to], oldest first."""
        now = self._now(stream_time_ms)
        raw = check_key(self.key_codec.encode(key))
        if time_to is None:
            start = self._start(time_from)
            if self.windowing.expired(start, now):
                return None
            found = self.table.get(self.session, raw, start)
            return None if found is None else self._value(found.value)
        return [(w.start_ms, self._value(w.value)) for w in self._fetch(raw, time_from, time_to, False, now)]

    def backward_fetch(
        self, key: Any, time_from: int, time_to: int, *, stream_time_ms: Any = _NO_STREAM_TIME
    ) -> list[tuple[int, Any]]:
        """`fetch` over a time span, newest first."""
        raw = check_key(self.key_codec.encode(key))
        now = self._now(stream_time_ms)
        return [(w.start_ms, self._value(w.value)) for w in self._fetch(raw, time_from, time_to, True, now)]

    def fetch_range(
        self,
        key_from: Any | None,
        key_to: Any | None,
        time_from: int,
        time_to: int,
        *,
        reverse: bool = False,
        stream_time_ms: Any = _NO_STREAM_TIME,
    ) -> Iterator[WindowedValue]:
        """Windows of keys in [key_from, key_to] (None: unbounded; key byte order) starting in
        [time_from, time_to], by key then start (both descending with `reverse`)."""
        key_range = KeyRange(
            None if key_from is None else check_key(self.key_codec.encode(key_from)),
            None if key_to is None else check_key(self.key_codec.encode(key_to)),
        )
        return self._range(key_range, time_from, time_to, reverse, self._now(stream_time_ms))

    def backward_fetch_range(self, key_from, key_to, time_from, time_to, **kwargs) -> Iterator[WindowedValue]:
        return self.fetch_range(key_from, key_to, time_from, time_to, reverse=True, **kwargs)

    def fetch_all(
        self, time_from: int, time_to: int, *, reverse: bool = False, stream_time_ms: Any = _NO_STREAM_TIME
    ) -> Iterator[WindowedValue]:
        """Every key's windows starting in [time_from, time_to], by key then start."""
        return self._range(EVERYTHING, time_from, time_to, reverse, self._now(stream_time_ms))

    def backward_fetch_all(self, time_from: int, time_to: int, **kwargs) -> Iterator[WindowedValue]:
        return self.fetch_all(time_from, time_to, reverse=True, **kwargs)

    def all(self, *, reverse: bool = False, stream_time_ms: Any = _NO_STREAM_TIME) -> Iterator[WindowedValue]:
        """Every retained window of every key, by key then start."""
        return self._range(EVERYTHING, 0, 2**63 - 1, reverse, self._now(stream_time_ms))

    def backward_all(self, **kwargs) -> Iterator[WindowedValue]:
        return self.all(reverse=True, **kwargs)

    def approximate_num_entries(self) -> int:
        """Windows stored (expired ones until their segment is dropped), estimated as the
        key-value store does (statestore.store.table_stats.rows_estimate)."""
        sample = list(islice(self.raw_windows(EVERYTHING, 0, 2**63 - 1, stream_time_ms=None), _SAMPLE_ROWS))
        return rows_estimate(self.session, self.spec.keyspace, self.spec.table, sample, _ROW_OVERHEAD)

    # -- the pieces ------------------------------------------------------------------------------

    def _now(self, stream_time_ms: Any) -> int | None:
        return self.stream_time() if stream_time_ms is _NO_STREAM_TIME else stream_time_ms

    @staticmethod
    def _start(window_start: int) -> int:
        if isinstance(window_start, bool) or not isinstance(window_start, int) or window_start < 0:
            raise ValueError(f"a window starts at epoch milliseconds of 0 or more, got {window_start!r}")
        return window_start

    def _value(self, data: bytes) -> Any:
        return decode_stored(self.value_codec, data, self.name)

    def _retained_span(self, time_from: int, time_to: int, now: int | None) -> tuple[int, int]:
        """[time_from, time_to] without what retention hides at stream time `now`."""
        low = max(0, time_from)
        if now is not None:
            low = max(low, now - self.windowing.retention_ms + 1)
        return low, time_to

    def _segments(self, low: int, high: int) -> list[int]:
        first, last = self.windowing.segment_of(low), self.windowing.segment_of(high)
        if last - first < _SEGMENTS_TO_PROBE:
            return list(range(first, last + 1))
        return [s for s in self.table.segments(self.session) if first <= s <= last]

    def _fetch(self, raw: bytes, time_from: int, time_to: int, reverse: bool, now: int | None):
        low, high = self._retained_span(time_from, time_to, now)
        if high < low:
            return iter(())
        return self.table.fetch(self.session, raw, self._segments(low, high), low, high, reverse)

    def raw_windows(
        self,
        key_range: KeyRange,
        time_from: int,
        time_to: int,
        *,
        reverse: bool = False,
        stream_time_ms: Any = _NO_STREAM_TIME,
    ) -> Iterator[WindowedEntry]:
        """The stored rows of keys in `key_range` (encoded key bytes) starting in [time_from,
        time_to], by key bytes then start, retention applied: for pagers that resume after a raw
        (key, start) (statestore.http.window_paging); `decode` turns a row into a WindowedValue."""
        low, high = self._retained_span(time_from, time_to, self._now(stream_time_ms))
        if high < low:
            return iter(())
        return self.table.fetch_range(self.session, self._segments(low, high), key_range, low, high, reverse)

    def decode(self, entry: WindowedEntry) -> WindowedValue:
        key = decode_stored(self.key_codec, entry.key, self.name, "key")
        return WindowedValue(key, entry.start_ms, entry.start_ms + self.windowing.size_ms, self._value(entry.value))

    def _range(self, key_range: KeyRange, time_from: int, time_to: int, reverse: bool, now: int | None):
        return map(self.decode, self.raw_windows(key_range, time_from, time_to, reverse=reverse, stream_time_ms=now))
