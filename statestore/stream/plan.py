"""The key-value apply's rule over a whole slice of keys at once, on fixed-size records.

The rule is statestore.stream.apply's `advance`: batch B skips a key already written by B or a
later batch, and otherwise writes old + delta with batch_id = B and the later of the two event
times. Here the decisions are numpy array arithmetic over the slice's stored states rather
than Python objects decoded and encoded back per key, so a key costs only the Python that
makes its outputs (BENCHMARKS.md has the cost per key).

A key's stored state is a record of 25 bytes: the batch that last wrote it, its event time,
which of the two are set, and its value, a long (the word count's values are Kafka's 8-byte
longs: statestore.core.codecs). The apply cache keeps entries as these records
(statestore.stream.apply_cache), so a cached key goes from the cache to the plan and back
as bytes, never decoded into an Entry (only the entries a batch writes are made); an entry read
from Cassandra becomes a record (`stored_record`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from statestore.core.codecs import LONG_MAX, LONG_MIN, decode_long
from statestore.core.errors import CodecError
from statestore.core.model import Entry
from statestore.core.retention import expired_among


class Delta(NamedTuple):
    """A change to one key within one batch: `amount` to add, latest event time seen, and the
    key's apply-cache bucket (statestore.stream.apply_cache; None without the cache). A named
    tuple: one is made per key of every batch (see statestore.core.model.Entry)."""

    key: bytes
    amount: int
    time_ms: int | None
    bucket: int | None = None


# A record's header (batch id, event time, which of the two are set), then the value.
HEADER = struct.Struct(">qqB")
HAS_BATCH, HAS_TIME = 1, 2
RECORD = np.dtype([("batch", ">i8"), ("time", ">i8"), ("flags", "u1"), ("value", ">i8")])
RECORD_BYTES = RECORD.itemsize  # 25: the header, then an 8-byte value
_VALUE_AT = HEADER.size
# What an absent key reads as: no batch, no time, value 0 (a new key counts from 0).
ABSENT = bytes(RECORD_BYTES)


def record_of(entry: Entry) -> bytes:
    """`entry` as a record, its value as stored (any length: the apply cache keeps what it is
    given; entries the plan reads from the store go through `stored_record`)."""
    flags = (HAS_BATCH if entry.batch_id is not None else 0) | (HAS_TIME if entry.time_ms is not None else 0)
    return HEADER.pack(entry.batch_id or 0, entry.time_ms or 0, flags) + entry.value


def stored_record(entry: Entry) -> bytes:
    """`entry`, read from the store, as the plan's record: refused (decode_long's CodecError)
    unless its value is a long. Checked here, per entry, because the plan reads a slice's
    records as one buffer, where two values of wrong lengths (7 and 9 bytes) would offset each
    other and be read shifted."""
    if len(entry.value) != RECORD_BYTES - _VALUE_AT:
        decode_long(entry.value)
    return record_of(entry)


def entry_of(key: bytes, record: bytes) -> Entry:
    batch_id, time_ms, flags = HEADER.unpack_from(record)
    return Entry(
        key,
        record[_VALUE_AT:],
        batch_id if flags & HAS_BATCH else None,
        time_ms if flags & HAS_TIME else None,
    )


class SlicePlan(NamedTuple):
    """What batch B does to a slice: the entries it writes; every key's record as the store
    holds it after those writes (the written ones new, the skipped ones as they were: what the
    apply cache keeps); how many keys B had written already; the slice's words and latest
    event time."""

    writes: list[Entry]
    records: list[tuple[bytes, bytes]]
    skipped: int
    words: int
    max_time_ms: int | None


def plan_slice(
    stored: Sequence[bytes | None], deltas: Sequence[Delta], batch_id: int, cutoff_ms: int | None = None
) -> SlicePlan:
    """Pure: `advance` for every delta over its key's stored record (`stored[i]` for
    `deltas[i]`; None: the key is absent), computed as arrays. The records are the apply
    cache's (made by this function) or `stored_record`'s (read from the store), so each is
    RECORD_BYTES long: a slice whose lengths do not add up is refused. One difference from
    `advance`: a stored value that is no long is refused even where the key would be
    skipped (the stream writes only longs, so such a store holds foreign data).

    Retention: a record dated before `cutoff_ms` (statestore.core.retention's rule) that the
    batch does not skip is taken as absent, so its key counts from zero with the batch's time
    only. The skip comes first: a replay of B never writes a key B already wrote."""
    count = len(deltas)
    if count == 0:
        return SlicePlan([], [], 0, 0, None)
    joined = b"".join(ABSENT if record is None else record for record in stored)
    if len(joined) != count * RECORD_BYTES or len(stored) != count:
        _refuse_odd_records(stored, count)
    old = np.frombuffer(joined, RECORD)
    amounts = _longs([d.amount for d in deltas])
    times = [d.time_ms for d in deltas]
    has_time = np.fromiter((t is not None for t in times), bool, count)
    new_times = _longs([0 if t is None else t for t in times])

    flags = old["flags"]
    skip = ((flags & HAS_BATCH) != 0) & (old["batch"] >= batch_id)
    old_has_time = (flags & HAS_TIME) != 0
    old_times = old["time"].astype(np.int64)
    gone = ~skip & expired_among(old_has_time, old_times, cutoff_ms)
    base = np.where(gone, 0, old["value"].astype(np.int64))
    old_has_time &= ~gone
    values = base + amounts
    overflow = ~skip & (((base ^ values) & (amounts ^ values)) < 0)
    if overflow.any():
        at = int(np.flatnonzero(overflow)[0])
        raise CodecError(f"{int(base[at]) + int(amounts[at])} does not fit a signed 64-bit long")
    keep_old_time = old_has_time & (~has_time | (old_times > new_times))
    new = np.empty(count, RECORD)
    new["batch"] = batch_id
    new["time"] = np.where(keep_old_time, old_times, new_times)
    timed = has_time | old_has_time
    new["flags"] = HAS_BATCH | np.where(timed, HAS_TIME, 0)
    new["value"] = values
    new[skip] = old[skip]  # a skipped key keeps its stored record: what the store still holds

    out = new.tobytes()
    out_times = new["time"].tolist()
    written = np.flatnonzero(~skip).tolist()
    timed_list = timed.tolist()
    keys = [d.key for d in deltas]
    writes = [
        Entry(
            keys[i],
            out[i * RECORD_BYTES + _VALUE_AT : (i + 1) * RECORD_BYTES],
            batch_id,
            out_times[i] if timed_list[i] else None,
        )
        for i in written
    ]
    records = [(keys[i], out[i * RECORD_BYTES : (i + 1) * RECORD_BYTES]) for i in range(count)]
    latest = new_times[has_time]
    return SlicePlan(
        writes,
        records,
        count - len(written),
        int(amounts.sum()),
        int(latest.max()) if latest.size else None,
    )


def plan_writes(
    current: Mapping[bytes, Entry], deltas: Sequence[Delta], batch_id: int, cutoff_ms: int | None = None
) -> tuple[list[Entry], int]:
    """Pure: the entries batch `batch_id` must write over the `current` entries of its keys
    (those dated before `cutoff_ms` taken as absent), and how many keys it already wrote."""
    records = [None if (entry := current.get(d.key)) is None else stored_record(entry) for d in deltas]
    plan = plan_slice(records, deltas, batch_id, cutoff_ms)
    return plan.writes, plan.skipped


def _longs(values: list[int]) -> np.ndarray:
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        worst = next(v for v in values if not LONG_MIN <= v <= LONG_MAX)
        raise CodecError(f"{worst} does not fit a signed 64-bit long") from None


def _refuse_odd_records(stored: Sequence[bytes | None], count: int) -> None:
    """The error for a slice whose records are not all RECORD_BYTES long: the stored value of
    that key is not a long (decode_long's error), or the slice is inconsistent."""
    if len(stored) != count:
        raise ValueError(f"{len(stored)} stored records for {count} deltas")
    for record in stored:
        if record is not None and len(record) != RECORD_BYTES:
            decode_long(record[_VALUE_AT:])  # raises CodecError naming the value's length
    raise AssertionError("records of odd length not found")  # pragma: no cover - unreachable
