"""The window aggregate store kind in the simulator (issue 47): the window kind's machine
(windows.py: its windowings, its one-task apply whose attempts die after any landing, or go on
after their successor) with the aggregate kind's JSON records (aggregates.py: a measure of every
aggregation, each bad record's reason) aggregated per key and window through the real
statestore.stream.aggregates.apply_window_aggregates (the windows read, those after the stream
time read or not as windows.py alternates it, plan_aggregates per window, the rows written) over
the fake window table.

A batch's input stage is aggregates.py's (null_value, the JSON reasons, future), then the
windows of each countable record are decided as for the word count's window store (windows.py:
WindowSpec.starts_of and closed at the stream time the batch began with): it counts in each
open window and is a dead letter `late` when one of them had closed.

The truth, from the topic and each record's model alone: a record's fate is decided by the
first recorded batch whose range holds it, at the stream time before that batch (the largest
event time of the records the recorded batches before it counted); each (key, window) must hold
the brute-force aggregate of the records counted in it (aggregates.brute_force and
result_problems: sum within rounding, distinct equal to one sketch of every value), with their
latest time. The allowance for the store's unfinished batch is the window kind's: a row tagged
with it holds the truth with that batch's records too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from statestore.core.aggregation import AggregateDelta
from statestore.core.model import WindowedEntry
from statestore.store.book import deadletters
from statestore.store.book.registry import BatchPosition
from statestore.stream.aggregates import apply_window_aggregates
from statestore.stream.apply import ApplyStats
from statestore.stream.apply_windows import window_cache_key
from tests.simulation.aggregates import (
    AMOUNTS,
    FAULT,
    KEYS,
    POSITIONS,
    QTYS,
    SPEC,
    USERS,
    Modelled,
    brute_force,
    input_reason,
    partial_of,
    produce_json,
    result_problems,
)
from tests.simulation.driver import StreamJob, dead_letter_reason
from tests.simulation.fake_cassandra import DeadLetterKey
from tests.simulation.fake_kafka import Record
from tests.simulation.machine import MAX_PARTITIONS
from tests.simulation.truth import uncountable_reason
from tests.simulation.windows import (
    AFTER_MS,
    AHEAD_MS,
    WINDOWINGS,
    AttemptTable,
    WindowProtocolMachine,
    WindowStreamJob,
    WindowTable,
    WindowTruth,
    WindowWorld,
    spec_of,
    windows_fate,
)


def window_aggregate_batch(
    records: list[Record], limit_ms: int | None, windowing, stream_time: int | None
) -> tuple[list[AggregateDelta], list[DeadLetterKey]]:
    """The batch's deltas (one per key and open window, keyed by window_cache_key, in order) and
    its dead letters: a bad record's reason, or `late` for a counted one with a closed window."""
    by_window: dict[tuple[int, str], list[tuple[Record, dict[str, Any]]]] = {}
    letters = []
    for record in records:
        reason, key, fields = (deadletters.NULL_VALUE, None, {}) if record.value is None else input_reason(record.value)
        if reason is None:
            reason = dead_letter_reason(record, limit_ms)  # too far ahead: the input stage's last check
        if reason is not None:
            letters.append(DeadLetterKey(record.partition, record.offset, reason))
            continue
        starts = windowing.starts_of(record.time_ms)
        opened = [s for s in starts if not windowing.closed(s, stream_time)]
        if len(opened) < len(starts):
            letters.append(DeadLetterKey(record.partition, record.offset, deadletters.LATE))
        for start in opened:
            by_window.setdefault((start, key), []).append((record, fields))
    deltas = [
        AggregateDelta(
            window_cache_key(key.encode(), start), partial_of(rows), max(r.time_ms for r, _ in rows), len(rows)
        )
        for (start, key), rows in sorted(by_window.items())
    ]
    return deltas, letters


class WindowAggregateStreamJob(WindowStreamJob):
    """WindowStreamJob whose batches are aggregated (see the module doc)."""

    def batch_of(self, records: list[Record], limit_ms: int | None, position: BatchPosition) -> tuple[list, list]:
        return window_aggregate_batch(records, limit_ms, self.windows.spec.windowing, position.stream_time_ms)

    def apply_to(self, rows: AttemptTable, deltas: list, position: BatchPosition, write_order: int) -> ApplyStats:
        """One attempt's apply_window_aggregates; as the word count's window kind does, windows
        after the stream time are not read on odd `write_order`s (the job's rule with the apply
        cache on), every window read on even ones."""
        after = position.stream_time_ms if write_order % 2 else None
        spec = self.windows.spec
        return apply_window_aggregates(
            None, spec, SPEC, position.batch_id, deltas, 1, position.write_ts, table=rows, stream_time_ms=after
        )


@dataclass
class WindowAggregateTruth(WindowTruth):
    """windows.WindowTruth for the window aggregate store (see the module doc)."""

    model: dict[tuple[int, int], Modelled] = field(default_factory=dict)

    def record_fate(self, record: Record, write_ts: int, rule: int, stream_time: int | None):
        reason = deadletters.NULL_VALUE if record.value is None else self.model[record.coordinates].reason
        reason = reason or uncountable_reason(record, write_ts, rule)
        if reason is not None:
            return reason, ()
        return windows_fate(record.time_ms, stream_time, self.windowing)

    def keys_of(self, record: Record) -> list[bytes]:
        return [self.model[record.coordinates].key.encode()]

    def window_problem(self, entry: WindowedEntry | None, want: list[Record]) -> str | None:
        if entry is None:
            return None if not want else "absent, the truth has records"
        if not want:
            return "stored, the truth has no records"
        try:
            have = SPEC.finish(SPEC.unpack(entry.value))
        except Exception as exc:  # noqa: BLE001 - the checker's report: a value that is not the spec's
            return f"its value cannot be read: {exc}"
        magnitude = math.fsum(abs(float(self.model[r.coordinates].fields["amount"])) for r in want)
        wrong = result_problems(have, brute_force(want, self.model), magnitude)
        want_time = max(r.time_ms for r in want)
        if entry.time_ms != want_time:
            wrong.append(f"time {entry.time_ms} (truth {want_time})")
        return "; ".join(wrong) or None


class WindowAggregateProtocolMachine(WindowProtocolMachine):
    """WindowProtocolMachine over a window aggregate store: JSON records (see the module doc)."""

    job_class: ClassVar[type[StreamJob]] = WindowAggregateStreamJob

    @initialize(which=st.integers(0, len(WINDOWINGS) - 1))
    def choose_windowing(self, which: int) -> None:
        """The store's windowing (WINDOWINGS), its value the measures' accumulators."""
        spec = replace(spec_of(WINDOWINGS[which]), value_codec=SPEC.value_format)
        self.model: dict[tuple[int, int], Modelled] = getattr(self, "model", {})
        self.windows = WindowWorld(spec, WindowTable(spec))
        self.world.windows = self.windows
        self.truth = WindowAggregateTruth(
            self.world.topic, windowing=spec.windowing, table=self.windows.table, model=self.model
        )

    @rule(partition=st.integers(0, MAX_PARTITIONS - 1), key=st.sampled_from(KEYS), qty=st.sampled_from(QTYS),
          amount=st.sampled_from(AMOUNTS), pos=st.sampled_from(POSITIONS), user=st.sampled_from(USERS), fault=FAULT,
          null=st.sampled_from((False,) * 5 + (True,)), ahead_ms=st.sampled_from(AHEAD_MS),
          after_ms=st.sampled_from(AFTER_MS))  # fmt: skip
    def produce(
        self,
        partition: int,
        key: Any,
        qty: int,
        amount: float,
        pos: Any,
        user: Any,
        fault: str | None,
        null: bool,
        ahead_ms: int,
        after_ms: int,
    ) -> None:
        """`after_ms` later by the clock, a JSON record (bad as `fault` says; `null`: no value) at
        `ahead_ms` from the clock (some behind it: windows closing)."""
        produce_json(self, partition, (key, qty, amount, pos, user, fault), null, ahead_ms, after_ms)
