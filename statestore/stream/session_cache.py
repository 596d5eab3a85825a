"""What the apply cache keeps of a session store's key: its sessions that a batch can still touch.

A batch with a key's event times from `first` to `last` needs the key's sessions ending at or
after `first - gap` (statestore.stream.apply_sessions). So a key's record in its bucket's file
(statestore.stream.apply_cache) is a *coverage* `from_ms` and every session of the key in the
store that ends at or after it: all of them, not only those a batch's range asked for. A later
batch whose times reach back no further than the coverage (`first - gap >= from_ms`) finds
everything it needs in the record, and reads nothing; one that reaches further back reads the
key from Cassandra, and the record starts again from what it read.

The record stays small: each time a batch touches a key, the sessions no later batch can touch
are dropped and the coverage moves up to match (`touchable_from`): a record on time has a
time at or after stream time - grace, so it reaches back to sessions ending at or after stream
time - grace - gap, and the stream time never goes back. Sessions expired at the stream time
(ended `retention` or more before it) are dropped too: the expire job may have dropped their
segment, so the apply takes them as absent whether it reads or uses the cache
(statestore.stream.apply_sessions, `visible`).

Pure: no I/O here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import SessionEntry
from statestore.core.windows import SessionSpec

# A record: the coverage, then one (start, end, count, batch_id, time) per session, by end.
_FROM = struct.Struct(">q")
_SESSION = struct.Struct(">qqqqq")
_NONE = -(2**63)  # batch_id or time absent (a session another program wrote)
# The coverage of a key nothing of the store holds at all (a file that is complete).
EVERYTHING_FROM = _NONE


def encode_record(from_ms: int, sessions: Iterable[SessionEntry]) -> bytes:
    """A key's record: coverage `from_ms` and its sessions ending at or after it."""
    parts = [_FROM.pack(from_ms)]
    for s in sorted(sessions, key=lambda e: (e.end_ms, e.start_ms)):
        batch = _NONE if s.batch_id is None else s.batch_id
        time = _NONE if s.time_ms is None else s.time_ms
        parts.append(_SESSION.pack(s.start_ms, s.end_ms, decode_long(s.value), batch, time))
    return b"".join(parts)


def decode_record(key: bytes, record: bytes) -> tuple[int, list[SessionEntry]]:
    """(coverage, sessions) of `key`'s record (encode_record's)."""
    (from_ms,) = _FROM.unpack_from(record)
    sessions = []
    for start, end, count, batch, time in _SESSION.iter_unpack(memoryview(record)[_FROM.size :]):
        batch_id = None if batch == _NONE else batch
        time_ms = None if time == _NONE else time
        sessions.append(SessionEntry(key, start, end, encode_long(count), batch_id, time_ms))
    return from_ms, sessions


def touchable_from(spec: SessionSpec, stream_time_ms: int | None) -> int:
    """The earliest session end a batch at `stream_time_ms` or later can touch: a record on time
    is at most the grace older than the stream time, and joins sessions at most the gap before
    it (EVERYTHING_FROM: no stream time yet, any)."""
    if stream_time_ms is None:
        return EVERYTHING_FROM
    return stream_time_ms - spec.grace_ms - spec.gap_ms


def live(spec: SessionSpec, sessions: Iterable[SessionEntry], stream_time_ms: int | None) -> list[SessionEntry]:
    """`sessions` without those expired at `stream_time_ms` (their segment may be gone)."""
    return [s for s in sessions if not spec.expired(s.end_ms, stream_time_ms)]


def after_change(
    spec: SessionSpec,
    from_ms: int,
    sessions: list[SessionEntry],
    deletes: Iterable[SessionEntry],
    writes: Iterable[SessionEntry],
    stream_time_ms: int | None,
) -> bytes:
    """A key's record once a batch replaced `deletes` with `writes` among its covered `sessions`:
    the coverage raised to touchable_from, and only the live sessions at or after it."""
    gone = {(s.start_ms, s.end_ms) for s in deletes}
    kept = [s for s in sessions if (s.start_ms, s.end_ms) not in gone]
    bound = max(from_ms, touchable_from(spec, stream_time_ms))
    now = [s for s in live(spec, [*kept, *writes], stream_time_ms) if s.end_ms >= bound]
    return encode_record(bound, now)
