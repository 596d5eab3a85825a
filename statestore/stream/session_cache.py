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
time - grace - gap, and the stream time never goes back. (The expire job drops only sessions
ended `retention` >= gap + grace before a stream time no later than the batch's: none a record
keeps but, when retention is exactly gap + grace, one ending right at that bound, which an
on-time record at exactly the grace would still join; the record keeps and joins it, as
sessionizing every record would.)

A record vouches only for what the store held settled. A batch that finds a key already
changed by an earlier attempt of itself (a task run again) may have read that change half
landed (a merge across Cassandra partitions is a LOGGED batch: whole in the end, not isolated
on the way), so the key's record then vouches for nothing (NOTHING_FROM) and the next batch
reads it.

Pure: no I/O here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from itertools import chain
from operator import attrgetter

from statestore.core.model import SessionEntry
from statestore.core.windows import SessionSpec

# A record: the coverage, then per session, by end, (start, end, batch_id, time, value length)
# and the value's bytes as stored (whatever its codec: only a session a batch joins is decoded).
_FROM = struct.Struct(">q")
_SESSION = struct.Struct(">qqqqI")
_NONE = -(2**63)  # batch_id or time absent (a session another program wrote)
_BY_END = attrgetter("end_ms", "start_ms")
# The coverage of a key nothing of the store holds at all (a file that is complete).
EVERYTHING_FROM = _NONE
# The coverage of a record that vouches for nothing: no batch's times reach back no further.
NOTHING_FROM = 2**63 - 1


def encode_record(from_ms: int, sessions: Iterable[SessionEntry]) -> bytes:
    """A key's record: coverage `from_ms` and its sessions ending at or after it."""
    sessions = list(sessions)
    if len(sessions) > 1:
        sessions.sort(key=_BY_END)
    parts = [_FROM.pack(from_ms)]
    for s in sessions:
        batch = _NONE if s.batch_id is None else s.batch_id
        time = _NONE if s.time_ms is None else s.time_ms
        value = bytes(s.value)
        parts.append(_SESSION.pack(s.start_ms, s.end_ms, batch, time, len(value)))
        parts.append(value)
    return b"".join(parts)


def decode_record(key: bytes, record: bytes) -> tuple[int, list[SessionEntry]]:
    """(coverage, sessions) of `key`'s record (encode_record's)."""
    (from_ms,) = _FROM.unpack_from(record)
    sessions = []
    at = _FROM.size
    while at < len(record):
        start, end, batch, time, length = _SESSION.unpack_from(record, at)
        at += _SESSION.size
        value = bytes(record[at : at + length])
        at += length
        batch_id = None if batch == _NONE else batch
        time_ms = None if time == _NONE else time
        sessions.append(SessionEntry(key, start, end, value, batch_id, time_ms))
    return from_ms, sessions


def touchable_from(spec: SessionSpec, stream_time_ms: int | None) -> int:
    """The earliest session end a batch at `stream_time_ms` or later can touch: a record on time
    is at most the grace older than the stream time, and joins sessions at most the gap before
    it (EVERYTHING_FROM: no stream time yet, any)."""
    if stream_time_ms is None:
        return EVERYTHING_FROM
    return stream_time_ms - spec.grace_ms - spec.gap_ms


def after_change(
    spec: SessionSpec,
    from_ms: int,
    sessions: list[SessionEntry],
    deletes: Iterable[SessionEntry],
    writes: Iterable[SessionEntry],
    stream_time_ms: int | None,
) -> bytes:
    """A key's record once a batch replaced `deletes` with `writes` among its covered `sessions`:
    the coverage raised to touchable_from, and only the sessions at or after it."""
    gone = {(s.start_ms, s.end_ms) for s in deletes}
    kept = [s for s in sessions if (s.start_ms, s.end_ms) not in gone] if gone else sessions
    bound = max(from_ms, touchable_from(spec, stream_time_ms))
    return encode_record(bound, [s for s in chain(kept, writes) if s.end_ms >= bound])


def vouching_for_nothing() -> bytes:
    """The record of a key whose sessions were not read settled (see the module doc)."""
    return encode_record(NOTHING_FROM, ())
