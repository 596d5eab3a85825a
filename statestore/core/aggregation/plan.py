"""The replay-safe apply's rule for aggregate stores: statestore.stream.apply's `advance` with
merge in place of addition.

Batch B skips a key already written by B or a later batch (B ran before: a replay, a retried
or speculative task) and otherwise writes merge(stored, partial) tagged B, with the later of
the two event times. An entry dated before the retention's cutoff counts as absent (identity).
Count and sum need the tag to stay exact under a replay; min, max, latest and distinct would
survive one anyway (their merge is idempotent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from statestore.core.aggregation.spec import AggregateSpec
from statestore.core.model import Entry
from statestore.core.retention import expired


class AggregateDelta(NamedTuple):
    """One key's partial accumulators of one batch (in the spec's order), its records' latest
    event time, how many records it holds, and its apply-cache bucket (None: no cache)."""

    key: bytes
    accumulators: tuple
    time_ms: int | None
    records: int = 0
    bucket: int | None = None


def plan_aggregates(
    spec: AggregateSpec,
    current: Mapping[bytes, Entry],
    deltas: Sequence[AggregateDelta],
    batch_id: int,
    cutoff_ms: int | None = None,
) -> tuple[list[Entry], int]:
    """Pure: the entries batch `batch_id` writes over the `current` entries of its keys, and
    how many keys it skipped (already written by it or a later batch)."""
    writes: list[Entry] = []
    skipped = 0
    for delta in deltas:
        stored = current.get(delta.key)
        if stored is not None and stored.batch_id is not None and stored.batch_id >= batch_id:
            skipped += 1
            continue
        if stored is None or expired(stored.time_ms, cutoff_ms):
            base, time_ms = spec.identity(), delta.time_ms
        else:
            base, time_ms = spec.unpack(stored.value), _later(stored.time_ms, delta.time_ms)
        merged = spec.merge(base, delta.accumulators)
        writes.append(Entry(delta.key, spec.pack(merged), batch_id, time_ms))
    return writes, skipped


def _later(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)
