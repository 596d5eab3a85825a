"""Window stores with codecs: the operations of Kafka Streams' WindowStore and
ReadOnlyWindowStore over a partitioned-window store (statestore.store.tables.partitioned_window).

The rule, as in Kafka Streams: retention holds at read time. A window that started `retention` or
more before the store's stream time is never returned, even before its segment is dropped
(`drop_expired`), and a put into such a window is dropped. The stream time is the registry's
`max_event_time` (statestore.store.handle.StoreHandle.stream_time); a store written only through
this API has none until given one (`stream_time_ms=`), so nothing expires there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from statestore.core.errors import OptionError, UnsupportedOperationError
from statestore.core.model import EVERYTHING, KeyRange, StoreSpec, WindowedEntry
from statestore.store.handle import FROM_REGISTRY, TimedHandle
from statestore.store.tables import window_table_for

# Beyond this many segments in a fetch's time span, ask the table which segments exist
# (one scan of its partition keys) instead of querying every one in turn.
_SEGMENTS_TO_PROBE = 64


@dataclass(frozen=True)
class WindowedValue:
    """One window of one key, decoded: [start_ms, end_ms) and the value counted in it."""

    key: Any
    start_ms: int
    end_ms: int
    value: Any


class WindowStore(TimedHandle):
    """put / fetch / backward_fetch / fetch_range / backward_fetch_range / fetch_all /
    backward_fetch_all / all / backward_all / remove / drop_expired over one window store."""

    ROW_OVERHEAD = 40  # window_start, batch_id, time, cell headers

    def _open_table(self, spec: StoreSpec, profile: object):
        if not spec.store_type.windowed:
            raise UnsupportedOperationError(
                f"store '{spec.name}' is {spec.store_type.value}: open it as a key-value or versioned store"
            )
        return window_table_for(spec, profile)

    # -- writes ----------------------------------------------------------------------------------

    def put(self, key: Any, value: Any, window_start: int, *, stream_time_ms: Any = FROM_REGISTRY) -> bool:
        """Set `key`'s value in the window starting at `window_start` (None deletes it).
        Returns False, writing nothing, when that window is past retention."""
        start = self._start(window_start)
        if self.windowing.expired(start, self._now(stream_time_ms)):
            return False
        raw = self._key(key)
        if value is None:
            self.table.delete(self.session, raw, start)
        else:
            data = self._value(value)
            self.table.write(self.session, [WindowedEntry(raw, start, data)], 1, None)
        return True

    def remove(self, key: Any, window_start: int) -> None:
        self.table.delete(self.session, self._key(key), self._start(window_start))

    # -- reads -----------------------------------------------------------------------------------

    def fetch(
        self, key: Any, time_from: int, time_to: int | None = None, *, stream_time_ms: Any = FROM_REGISTRY
    ) -> Any | list[tuple[int, Any]]:
        """With one time: the value of `key`'s window starting at `time_from` (None: absent or
        expired). With two: [(window start, value)] of `key`'s windows starting in
        [time_from, time_to], oldest first."""
        now = self._now(stream_time_ms)
        raw = self._key(key)
        if time_to is None:
            start = self._start(time_from)
            if self.windowing.expired(start, now):
                return None
            found = self.table.get(self.session, raw, start)
            return None if found is None else self._decode_value(found.value)
        return [(w.start_ms, self._decode_value(w.value)) for w in self._fetch(raw, time_from, time_to, False, now)]

    def backward_fetch(
        self, key: Any, time_from: int, time_to: int, *, stream_time_ms: Any = FROM_REGISTRY
    ) -> list[tuple[int, Any]]:
        """`fetch` over a time span, newest first."""
        raw = self._key(key)
        now = self._now(stream_time_ms)
        return [(w.start_ms, self._decode_value(w.value)) for w in self._fetch(raw, time_from, time_to, True, now)]

    def fetch_range(
        self,
        key_from: Any | None,
        key_to: Any | None,
        time_from: int,
        time_to: int,
        *,
        reverse: bool = False,
        stream_time_ms: Any = FROM_REGISTRY,
    ) -> Iterator[WindowedValue]:
        """Windows of keys in [key_from, key_to] (None: unbounded; key byte order) starting in
        [time_from, time_to], by key then start (both descending with `reverse`)."""
        key_range = KeyRange(
            None if key_from is None else self._key(key_from),
            None if key_to is None else self._key(key_to),
        )
        return self._range(key_range, time_from, time_to, reverse, self._now(stream_time_ms))

    def backward_fetch_range(self, key_from, key_to, time_from, time_to, **kwargs) -> Iterator[WindowedValue]:
        return self.fetch_range(key_from, key_to, time_from, time_to, reverse=True, **kwargs)

    def fetch_all(
        self, time_from: int, time_to: int, *, reverse: bool = False, stream_time_ms: Any = FROM_REGISTRY
    ) -> Iterator[WindowedValue]:
        """Every key's windows starting in [time_from, time_to], by key then start."""
        return self._range(EVERYTHING, time_from, time_to, reverse, self._now(stream_time_ms))

    def backward_fetch_all(self, time_from: int, time_to: int, **kwargs) -> Iterator[WindowedValue]:
        return self.fetch_all(time_from, time_to, reverse=True, **kwargs)

    def all(self, *, reverse: bool = False, stream_time_ms: Any = FROM_REGISTRY) -> Iterator[WindowedValue]:
        """Every retained window of every key, by key then start."""
        return self._range(EVERYTHING, 0, 2**63 - 1, reverse, self._now(stream_time_ms))

    def backward_all(self, **kwargs) -> Iterator[WindowedValue]:
        return self.all(reverse=True, **kwargs)

    def latest(self, windows: int = 3, *, stream_time_ms: Any = FROM_REGISTRY) -> list[tuple[int, list[WindowedValue]]]:
        """The `windows` newest window starts holding a value (none after the stream time), newest
        first, each with every key's value in it (by key). Reads those windows only when the
        store has a stream time; without one (a store filled by puts, not a stream) every window."""
        if windows < 1:
            raise OptionError(f"windows must be at least 1, got {windows}")
        now = self._now(stream_time_ms)
        size, hop = self.windowing.size_ms, self.windowing.hop_ms
        if now is None:
            read = self.all(stream_time_ms=None)
        else:
            read = self.fetch_all(max(0, now - size - windows * hop), now, stream_time_ms=now)
        by_start: dict[int, list[WindowedValue]] = {}
        for window in read:
            by_start.setdefault(window.start_ms, []).append(window)
        return [(start, by_start[start]) for start in sorted(by_start, reverse=True)[:windows]]

    def count_entries(self) -> int:
        """Windows with a value, retention applied, exactly: reads every row of the store."""
        return sum(1 for _ in self.raw_windows(EVERYTHING, 0, 2**63 - 1))

    # -- the pieces ------------------------------------------------------------------------------

    @staticmethod
    def _start(window_start: int) -> int:
        if isinstance(window_start, bool) or not isinstance(window_start, int) or window_start < 0:
            raise ValueError(f"a window starts at epoch milliseconds of 0 or more, got {window_start!r}")
        return window_start

    def _retained_span(self, time_from: int, time_to: int, now: int | None) -> tuple[int, int]:
        """[time_from, time_to] without what retention hides at stream time `now`."""
        low = max(0, time_from)
        if now is not None:
            low = max(low, now - self.windowing.retention_ms + 1)
        return low, time_to

    def _segments(self, low: int, high: int) -> list[int]:
        first, last = self.table.segment_span(low, high)
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
        stream_time_ms: Any = FROM_REGISTRY,
    ) -> Iterator[WindowedEntry]:
        """The stored rows of keys in `key_range` (encoded key bytes) starting in [time_from,
        time_to], by key bytes then start, retention applied: for pagers that resume after a raw
        (key, start), as the HTTP API's do; `decode` turns a row into a WindowedValue."""
        low, high = self._retained_span(time_from, time_to, self._now(stream_time_ms))
        if high < low:
            return iter(())
        return self.table.fetch_range(self.session, self._segments(low, high), key_range, low, high, reverse)

    def decode(self, entry: WindowedEntry) -> WindowedValue:
        end_ms = entry.start_ms + self.windowing.size_ms
        return WindowedValue(self._decode_key(entry.key), entry.start_ms, end_ms, self._decode_value(entry.value))

    def _range(self, key_range: KeyRange, time_from: int, time_to: int, reverse: bool, now: int | None):
        return map(self.decode, self.raw_windows(key_range, time_from, time_to, reverse=reverse, stream_time_ms=now))

    def _stored_rows(self) -> Iterator[WindowedEntry]:
        return self.raw_windows(EVERYTHING, 0, 2**63 - 1, stream_time_ms=None)
