"""The session aggregate store kind in the simulator (issue 47): the session kind's machine
(sessions.py: records on the scale of the gap, the one-task apply whose attempts die after any
landing or go on after their successor, LOGGED batches the batch log applies later, keys past
the stream time read or not) with the aggregate kind's JSON records (aggregates.py: a measure
of every aggregation, each bad record's reason) folded into each key's sessions through the
real statestore.stream.apply_sessions.apply_session_deltas with
values=session_aggregates.MeasureValues(SPEC) (a session holds the packed accumulators of the
stored sessions it merges and of the batch's records within it) over the fake session table.
Its records' times are the session kind's and some behind the clock (BEHIND_MS), and a steady
batch of good records grows, bridges and merges a key's sessions batch after batch.

A batch's input stage is session_aggregates' (session_partials over json_input's records): a
record with a reason (null_value, the JSON reasons, future) is a dead letter with it; a
countable one is late (a dead letter `late`) when its event time is before 1970 or more than
the grace older than the stream time the batch began with (_on_time); every other record
counts in its key's session, the batch's KeyTimes of a key its distinct event times ascending
with each time's partial accumulators (partial_of over that time's records).

The truth, from the topic and each record's model alone: a record's fate is decided by the
first recorded batch whose range holds it, at the stream time that batch began with; each
key's sessions are the sessions (cut where two event times are more than the gap apart) of its
counted records, and each session must hold the brute-force aggregate of its records
(aggregates.brute_force and result_problems: sum within rounding, distinct equal to one sketch
of every value) with their latest time. The allowance for the store's unfinished batch is the
session kind's; the store is judged as it will be once the batch log has applied what it holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from statestore.core.model import SessionEntry
from statestore.store.book import deadletters
from statestore.store.book.registry import BatchPosition
from statestore.stream.apply_sessions import KeyTimes
from statestore.stream.plan import Delta
from statestore.stream.session_aggregates import MeasureValues
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
from tests.simulation.fake_sessions import FakeSessionTable
from tests.simulation.machine import MAX_PARTITIONS
from tests.simulation.sessions import (
    AFTER_MS,
    AHEAD_MS,
    GAP_MS,
    GRACE_MS,
    SessionProtocolMachine,
    SessionStreamJob,
    SessionTruth,
    SessionWorld,
    TaskFaults,
    TruthSession,
)
from tests.simulation.sessions import SPEC as SESSIONS
from tests.simulation.truth import uncountable_reason

STORE = replace(SESSIONS, name="session_aggregates", value_codec=SPEC.value_format)
# The session kind's record times, and some behind the clock (within the grace or past it): a
# record between two stored sessions of its key bridges them (the merge of several stored
# sessions' accumulators), and one past the grace is late.
BEHIND_MS = (-30_000, -50_000, -90_000)
TIMES_MS = (*AHEAD_MS, *BEHIND_MS)


def session_aggregate_batch(
    records: list[Record], limit_ms: int | None, stream_time: int | None
) -> tuple[list[KeyTimes], list[DeadLetterKey], int | None]:
    """The batch's KeyTimes (one per key, in key order: its distinct on-time event times and
    each time's partial accumulators), its dead letters (a bad record's reason, or `late`) and
    its latest counted time."""
    by_key: dict[str, dict[int, list[tuple[Record, dict[str, Any]]]]] = {}
    letters = []
    for record in records:
        reason, key, fields = (deadletters.NULL_VALUE, None, {}) if record.value is None else input_reason(record.value)
        if reason is None:
            reason = dead_letter_reason(record, limit_ms)  # too far ahead: the input stage's last check
        if reason is None and not _on_time(record.time_ms, stream_time):
            reason = deadletters.LATE
        if reason is not None:
            letters.append(DeadLetterKey(record.partition, record.offset, reason))
            continue
        by_key.setdefault(key, {}).setdefault(record.time_ms, []).append((record, fields))
    deltas = [
        KeyTimes(
            Delta(key.encode(), sum(len(rows) for rows in at.values()), max(at)),
            tuple(sorted(at)),
            {time: partial_of(rows) for time, rows in at.items()},
        )
        for key, at in sorted(by_key.items())
    ]
    latest = max((delta.delta.time_ms for delta in deltas), default=None)
    return deltas, letters, latest


def _on_time(time_ms: int, stream_time: int | None) -> bool:
    """session_aggregates._on_time over one record: on or after 1970, and no more than the
    grace older than the stream time the batch began with (None: every time is on time)."""
    return time_ms >= 0 and (stream_time is None or time_ms + GRACE_MS >= stream_time)


class SessionAggregateStreamJob(SessionStreamJob):
    """SessionStreamJob whose sessions hold the measures (see the module doc)."""

    values: ClassVar[MeasureValues] = MeasureValues(SPEC)

    def batch_of(
        self, records: list[Record], limit_ms: int | None, position: BatchPosition
    ) -> tuple[list[KeyTimes], list[DeadLetterKey], int | None]:
        return session_aggregate_batch(records, limit_ms, position.stream_time_ms)


@dataclass
class SessionAggregateTruth(SessionTruth):
    """sessions.SessionTruth for the session aggregate store (see the module doc)."""

    model: dict[tuple[int, int], Modelled] = field(default_factory=dict)

    def record_fate(self, record: Record, write_ts: int, rule: int, stream_time: int | None) -> str | None:
        """No value, else the record's modelled reason, else too far ahead; else late when its
        time is before 1970 or more than the grace before `stream_time` (stated apart from the
        store's rule)."""
        reason = deadletters.NULL_VALUE if record.value is None else self.model[record.coordinates].reason
        reason = reason or uncountable_reason(record, write_ts, rule)
        late = record.time_ms < 0 or (stream_time is not None and record.time_ms + GRACE_MS < stream_time)
        return deadletters.LATE if reason is None and late else reason

    def keys_of(self, record: Record) -> list[bytes]:
        return [self.model[record.coordinates].key.encode()]

    def session_problem(self, entry: SessionEntry, session: TruthSession) -> str | None:
        """The stored session's measures against the brute force of its records, and its
        latest time against theirs."""
        try:
            have = SPEC.finish(SPEC.unpack(entry.value))
        except Exception as exc:  # noqa: BLE001 - the checker's report: a value that is not the spec's
            return f"its value cannot be read: {exc}"
        records = list(session.records)
        magnitude = math.fsum(abs(float(self.model[r.coordinates].fields["amount"])) for r in records)
        wrong = result_problems(have, brute_force(records, self.model), magnitude)
        want_time = max(r.time_ms for r in records)
        if entry.time_ms != want_time:
            wrong.append(f"time {entry.time_ms} (truth {want_time})")
        return "; ".join(wrong) or None

    def value_shown(self, entry: SessionEntry):
        try:
            return SPEC.finish(SPEC.unpack(entry.value))
        except Exception:  # noqa: BLE001 - shown as it is; session_problem says why
            return entry.value


class SessionAggregateProtocolMachine(SessionProtocolMachine):
    """SessionProtocolMachine over a session aggregate store: JSON records (see the module doc)."""

    job_class: ClassVar[type[StreamJob]] = SessionAggregateStreamJob

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[tuple[int, int], Modelled] = {}
        self.sessions = SessionWorld(FakeSessionTable(STORE))
        self.world.sessions = self.sessions
        self.truth = SessionAggregateTruth(self.world.topic, table=self.sessions.table, model=self.model)

    @rule(partition=st.integers(0, MAX_PARTITIONS - 1), key=st.sampled_from(KEYS), qty=st.sampled_from(QTYS),
          amount=st.sampled_from(AMOUNTS), pos=st.sampled_from(POSITIONS), user=st.sampled_from(USERS), fault=FAULT,
          null=st.sampled_from((False,) * 5 + (True,)), ahead_ms=st.sampled_from(TIMES_MS),
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
        `ahead_ms` from the clock, on the scale of the session gap (some behind the clock)."""
        produce_json(self, partition, (key, qty, amount, pos, user, fault), null, ahead_ms, after_ms)

    @precondition(lambda self: self.job is not None)
    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
          times=st.lists(st.sampled_from((0, GAP_MS // 2, GAP_MS + 10_000, *BEHIND_MS[:2])), min_size=1, max_size=3),
          after_ms=st.sampled_from(AFTER_MS), amount=st.sampled_from(AMOUNTS), user=st.sampled_from(USERS))  # fmt: skip
    def steady_batch(self, keys: list[Any], times: list[int], after_ms: int, amount: float, user: Any) -> None:
        """`after_ms` later by the clock, a good record of each of `keys` at each of `times` from
        the clock (positions in order), and the batch that reads them, nothing failing: a key's
        sessions grown, bridged and merged batch after batch."""
        self.world.clock_ms += after_ms
        for number, (key, ahead) in enumerate((key, ahead) for key in keys for ahead in times):
            self.produce(0, key, 1, amount, POSITIONS[number % len(POSITIONS)], user, None, False, ahead, 0)
        self.job.faults = TaskFaults()
        self._run(self.job.trigger(0), None)
