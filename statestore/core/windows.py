"""Time windows over event time, after Kafka Streams' TimeWindows and SessionWindows. Pure.

Windows are aligned to the epoch and cover [start, end). A tumbling window is a hopping window
whose hop equals its size; with a smaller hop, a time falls in every window that contains it
(size/hop windows when the hop divides the size). Windows never start before the epoch.

Stream time is the largest event time a store has applied. A window is **late** for a record
once it ended more than `grace` before the stream time (the record is not counted in it), and
**expired** once it started `retention` or more before the stream time (it is never returned,
and its segment may be dropped). Retention is at least size + grace, so a window expires only
after it can no longer change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from math import gcd

from statestore.core.durations import format_duration
from statestore.core.errors import OptionError

DAY_MS = 86_400_000
MINUTE_MS = 60_000


class _Segmented:
    """What window and session settings share: a retention (at least the span a window or
    session can still change in) and storage segments, both defaulted the same way."""

    retention_ms: int | None
    segment_ms: int | None

    def _settle_retention(self, floor: int, span: str, why: str) -> None:
        """Default retention (the larger of `floor` and a day) and segments (half of it, at
        least a minute), and refuse a retention below `floor` (`span` + grace)."""
        if self.retention_ms is None:
            object.__setattr__(self, "retention_ms", max(floor, DAY_MS))
        if self.retention_ms < floor:
            raise OptionError(
                f"retention ({format_duration(self.retention_ms)}) must be at least {span} + grace "
                f"({format_duration(floor)}): {why}"
            )
        if self.segment_ms is None:
            object.__setattr__(self, "segment_ms", max(self.retention_ms // 2, MINUTE_MS))
        if self.segment_ms <= 0:
            raise OptionError(f"a segment lasts more than 0 ms, got {self.segment_ms}")

    def live_segments_from(self, stream_time_ms: int | None) -> int:
        """The first segment that may still hold a retained window at `stream_time_ms`: every
        segment below it holds only expired windows (start <= stream time - retention)."""
        if stream_time_ms is None:
            return 0
        horizon = stream_time_ms - self.retention_ms  # windows starting at or before it are expired
        if horizon < 0:
            return 0
        # Segment s spans starts [s*S, (s+1)*S - 1]: all expired when (s+1)*S - 1 <= horizon.
        return (horizon + 1) // self.segment_ms

    def expired_segments(self, segments: list[int], stream_time_ms: int | None) -> list[int]:
        """The segments among `segments` that hold only expired windows at `stream_time_ms`."""
        below = self.live_segments_from(stream_time_ms)
        return [segment for segment in segments if segment < below]


@dataclass(frozen=True)
class WindowSpec(_Segmented):
    """A windowing: size, hop (= size: tumbling), grace and retention, all in milliseconds.

    Retention defaults to the larger of size + grace and one day (Kafka Streams' old default),
    so closed windows stay queryable for a while.
    """

    size_ms: int
    hop_ms: int | None = None
    grace_ms: int = 0
    retention_ms: int | None = None
    # The time span of one storage segment (part of the table's partition key). Fixed when the
    # store is registered: half the retention, at least a minute (Kafka Streams' rule), so
    # about three segments hold the retained windows and dropping the oldest frees a third.
    segment_ms: int | None = None
    # Hopping windows kept as panes (statestore.store.tables.paned_window): a row per key and
    # pane of gcd(size, hop) ms, a window read as the merge of its panes, so a record is written
    # once, not size/hop times. The stream asks for them for its hopping count stores; a store
    # made to be written by put() (a pane cannot hold one window's value) and one registered
    # before panes existed keep a row per window. Always False for tumbling windows. Not
    # compared: a stream reopening a store takes the store's choice (`layout` holds it).
    panes: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if self.size_ms <= 0:
            raise OptionError(f"a window lasts more than 0 ms, got {self.size_ms}")
        if self.hop_ms is None:
            object.__setattr__(self, "hop_ms", self.size_ms)
        if not 0 < self.hop_ms <= self.size_ms:
            raise OptionError(
                f"the hop ({format_duration(self.hop_ms)}) must be more than 0 and at most the window "
                f"({format_duration(self.size_ms)}): a larger hop would skip time"
            )
        if self.grace_ms < 0:
            raise OptionError(f"grace cannot be negative, got {self.grace_ms} ms")
        self._settle_retention(
            self.size_ms + self.grace_ms, "window", "a window would be dropped while it can still change"
        )
        object.__setattr__(self, "panes", bool(self.panes) and not self.tumbling)

    def as_dict(self) -> dict[str, int | bool]:
        """The settings as recorded in the store registry (statestore.store.book.registry)."""
        return {
            "size_ms": self.size_ms,
            "hop_ms": self.hop_ms,
            "grace_ms": self.grace_ms,
            "retention_ms": self.retention_ms,
            "segment_ms": self.segment_ms,
            "panes": self.panes,
        }

    def summary(self) -> str:
        """In words, for people: e.g. "1m hopping windows (hop 20s), grace 0s, retention 1d"."""
        kind = "tumbling windows" if self.tumbling else f"hopping windows (hop {format_duration(self.hop_ms)})"
        return (
            f"{format_duration(self.size_ms)} {kind}, grace {format_duration(self.grace_ms)}, "
            f"retention {format_duration(self.retention_ms)}"
        )

    @property
    def layout(self) -> tuple[int, int, int, bool]:
        """What fixes where a window's row lives and which rows exist: size, hop, segment and
        whether the rows are panes."""
        return (self.size_ms, self.hop_ms, self.segment_ms, self.panes)

    def segment_of(self, start_ms: int) -> int:
        return start_ms // self.segment_ms

    @property
    def tumbling(self) -> bool:
        return self.hop_ms == self.size_ms

    def starts_of(self, time_ms: int) -> list[int]:
        """The starts of every window containing `time_ms`, ascending."""
        if time_ms < 0:
            return []
        last = time_ms - time_ms % self.hop_ms
        first = max(0, last - (self.size_ms - 1) // self.hop_ms * self.hop_ms)
        while first + self.size_ms <= time_ms:  # (size - 1) // hop over-reaches by one hop at most
            first += self.hop_ms
        return list(range(first, last + 1, self.hop_ms))

    def end_of(self, start_ms: int) -> int:
        return start_ms + self.size_ms

    def late(self, start_ms: int, stream_time_ms: int | None) -> bool:
        """Whether window `start_ms` takes no more records at `stream_time_ms` (None: nothing
        applied yet, nothing is late)."""
        return stream_time_ms is not None and self.end_of(start_ms) + self.grace_ms < stream_time_ms

    def expired(self, start_ms: int, stream_time_ms: int | None) -> bool:
        """Whether window `start_ms` is past retention at `stream_time_ms`: never returned."""
        return stream_time_ms is not None and start_ms <= stream_time_ms - self.retention_ms

    def closed(self, start_ms: int, stream_time_ms: int | None) -> bool:
        """Whether window `start_ms` refuses a record at `stream_time_ms`: late, or (when the
        retention is exactly window + grace) expired the moment it closes. The stream's Spark
        plan (statestore.stream.windowed) states this same rule in Spark SQL."""
        return self.late(start_ms, stream_time_ms) or self.expired(start_ms, stream_time_ms)

    def first_open_start(self, stream_time_ms: int | None) -> int:
        """The smallest window start `closed` leaves open at `stream_time_ms` (0 when nothing
        has been applied): both of its tests close every start below some bound, so the open
        windows are exactly those starting at or after this one."""
        if stream_time_ms is None:
            return 0
        not_late = stream_time_ms - self.size_ms - self.grace_ms
        not_expired = stream_time_ms - self.retention_ms + 1
        return max(0, not_late, not_expired)

    # -- panes: a row per key and pane, a window the merge of its panes' rows ----------------------
    #
    # A pane row is (pane start, `from`): what records of that pane counted in the windows
    # starting at `from` or later (the windows still open when they were applied). A record's
    # pane is its time over pane_ms; its `from` is the first of its windows open at the batch's
    # stream time, pane_from. Window s is then the merge of the rows whose pane lies in
    # [s, s + size) and whose `from` is at most s: a partly late record never reaches a closed
    # window, and a window's value equals the one a row per window would hold.

    @property
    def pane_ms(self) -> int:
        """The pane span: gcd(size, hop), so every window is a whole number of panes."""
        return gcd(self.size_ms, self.hop_ms)

    def pane_of(self, time_ms: int) -> int:
        return time_ms - time_ms % self.pane_ms

    def _hop_at_or_after(self, time_ms: int) -> int:
        return -(-max(0, time_ms) // self.hop_ms) * self.hop_ms

    def pane_from(self, pane_ms: int, stream_time_ms: int | None) -> int:
        """The `from` of a row of pane `pane_ms` written at `stream_time_ms`: the first window
        containing the pane that is open then (more than `pane_ms`: every such window is closed)."""
        return self._hop_at_or_after(max(pane_ms - self.size_ms + self.pane_ms, self.first_open_start(stream_time_ms)))

    def windows_of_row(self, pane_ms: int, from_ms: int) -> range:
        """The window starts a pane row counts in: from max(`from_ms`, the first window holding
        the pane) to the last window holding it, the one starting at or before the pane."""
        first = max(self._hop_at_or_after(from_ms), self._hop_at_or_after(pane_ms - self.size_ms + self.pane_ms))
        return range(first, pane_ms - pane_ms % self.hop_ms + 1, self.hop_ms)

    def pane_span(self, start_from: int, start_to: int) -> tuple[int, int]:
        """The panes the windows starting in [start_from, start_to] are made of (inclusive)."""
        return max(0, start_from), start_to + self.size_ms - self.pane_ms


def compose_windows(
    windowing: WindowSpec,
    rows: Iterable[tuple[int, int, object]],
    merge: Callable[[list], object],
    start_from: int = 0,
    start_to: int = 2**63 - 1,
) -> list[tuple[int, object]]:
    """Pure: one key's windows starting in [start_from, start_to] from its pane rows (pane start,
    `from`, value), by start: each window the `merge` of the values of the rows it is made of
    (see WindowSpec's panes). A window no row counts in is absent."""
    parts: dict[int, list] = {}
    for pane, from_ms, value in rows:
        for start in windowing.windows_of_row(pane, from_ms):
            if start_from <= start <= start_to:
                parts.setdefault(start, []).append(value)
    return [(start, merge(parts[start])) for start in sorted(parts)]


@dataclass(frozen=True)
class SessionSpec(_Segmented):
    """Session windows, after Kafka Streams' SessionWindows: per key, events no more than
    `gap_ms` apart form one session [first event, last event]. All in milliseconds.

    A record is **late** once it is more than `grace` older than the stream time (it is not
    counted; Kafka Streams judges by the end of the session it would merge into, which needs
    the store's sessions before deciding: here it is decided from the record alone, so the
    batch's dead letters are known before its writes). A session is **expired** once it ended
    `retention` or more before the stream time. Retention defaults to the larger of gap + grace
    and one day; segments (by session end) to half of it, at least a minute.
    """

    gap_ms: int
    grace_ms: int = 0
    retention_ms: int | None = None
    segment_ms: int | None = None

    def __post_init__(self) -> None:
        if self.gap_ms <= 0:
            raise OptionError(f"a session gap lasts more than 0 ms, got {self.gap_ms}")
        if self.grace_ms < 0:
            raise OptionError(f"grace cannot be negative, got {self.grace_ms} ms")
        self._settle_retention(self.gap_ms + self.grace_ms, "gap", "a session would be dropped while it can still grow")

    def as_dict(self) -> dict[str, int]:
        return {
            "gap_ms": self.gap_ms,
            "grace_ms": self.grace_ms,
            "retention_ms": self.retention_ms,
            "segment_ms": self.segment_ms,
        }

    def summary(self) -> str:
        """In words, for people: e.g. "sessions, gap 30s, grace 20s, retention 1d"."""
        return (
            f"sessions, gap {format_duration(self.gap_ms)}, grace {format_duration(self.grace_ms)}, "
            f"retention {format_duration(self.retention_ms)}"
        )

    @property
    def layout(self) -> tuple[str, int]:
        """What fixes where a session's row lives: the segment span (sessions by their end)."""
        return ("sessions", self.segment_ms)

    def segment_of(self, end_ms: int) -> int:
        return end_ms // self.segment_ms

    def late(self, time_ms: int, stream_time_ms: int | None) -> bool:
        return stream_time_ms is not None and time_ms + self.grace_ms < stream_time_ms

    def expired(self, end_ms: int, stream_time_ms: int | None) -> bool:
        return stream_time_ms is not None and end_ms <= stream_time_ms - self.retention_ms


@dataclass(frozen=True)
class Session:
    """A session of one key: events from `start_ms` to `end_ms` (both inclusive, as in Kafka
    Streams), no two of them further apart than the gap."""

    start_ms: int
    end_ms: int


def merge_into_sessions(existing: list[Session], times: list[int], gap_ms: int) -> tuple[list[Session], list[Session]]:
    """Sessions after events at `times` join `existing` (one key's sessions).

    Returns (sessions now, sessions replaced): every event closer than or exactly `gap_ms` to
    a session joins it, and sessions an event bridges merge into one; the replaced ones are
    removed by the caller. Like Kafka Streams, with inactivity gap `gap_ms`.
    """
    if gap_ms <= 0:
        raise OptionError(f"a session gap lasts more than 0 ms, got {gap_ms}")
    spans = sorted([(s.start_ms, s.end_ms, s) for s in existing] + [(t, t, None) for t in times], key=lambda x: x[:2])
    merged: list[tuple[int, int, list[Session]]] = []
    for start, end, original in spans:
        if merged and start - merged[-1][1] <= gap_ms:
            low, high, members = merged[-1]
            merged[-1] = (low, max(high, end), members + ([original] if original else []))
        else:
            merged.append((start, end, [original] if original else []))
    now, replaced = [], []
    for start, end, members in merged:
        session = Session(start, end)
        now.append(session)
        replaced.extend(m for m in members if m != session)
    return now, replaced
