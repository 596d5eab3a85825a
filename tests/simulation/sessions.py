"""The session store kind in the simulator: the stream's driver (driver.StreamJob) applying
each batch to a partitioned session store through the real planning of
statestore.stream.apply_sessions (apply_session_deltas: session_reads, key_change,
planned_then_written) over the fake table of fake_sessions, whose writes follow the real
partitioned_session.write_plan. The batch's apply is one Spark task; its attempts may die after
any landing of their writes (Spark runs a new attempt of the task), and a speculative attempt
may go on after its successor, or start only then.

The truth of a session store: each key's sessions are the sessions (cut where two event times
are more than the gap apart) of the event times of its counted records, a record's fate
decided by the first recorded batch that read it: no value and too far ahead are dead letters
as for key-value stores, and a record with words more than the grace older than the stream
time the batch began with is a dead letter `late`. The allowance for the store's unfinished
batch: each of a key's sessions after that batch (a cluster) is either not written yet (the
sessions it merges still there) or written, with any of the sessions it merges not deleted yet.
The store is judged as it will be once the batch log has applied what it holds.

SessionProtocolMachine adds the events: a trigger with task attempts dying and a speculative
one; the batch log applying one of its batches; an old attempt going on. A kind whose sessions
hold other values (session_aggregates.py) overrides the job's batch (batch_of) and values, and
the truth's record fate, keys and per-session value check (record_fate, keys_of,
session_problem, value_shown).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from statestore.core.codecs import decode_long
from statestore.core.model import SessionEntry, StoreSpec, StoreType
from statestore.core.windows import SessionSpec
from statestore.store.book import deadletters
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.stream.apply_sessions import COUNTS, KeyTimes, SessionValues, apply_session_deltas
from statestore.stream.plan import Delta
from statestore.stream.position import stream_time_ms
from statestore.stream.tokenize import tokenize
from statestore.stream.transforms import future_limit_ms
from tests.simulation.driver import Step, StreamJob, dead_letter_reason
from tests.simulation.fake_cassandra import DeadLetterKey, FakeCassandra
from tests.simulation.fake_kafka import Record
from tests.simulation.fake_sessions import AttemptDied, AttemptRows, FakeSessionTable, Landing
from tests.simulation.machine import MAX_PARTITIONS, STEP_INDEX, WORDS, BatchProtocolMachine
from tests.simulation.truth import Truth, Violations, uncountable_reason

GAP_MS = 60_000
GRACE_MS = 60_000
SEGMENT_MS = 60_000  # short segments: merges often span Cassandra partitions (LOGGED batches)
SPEC = StoreSpec(
    "ks", "sessions", StoreType.PARTITIONED_SESSION, 2, windowing=SessionSpec(GAP_MS, GRACE_MS, None, SEGMENT_MS)
)
LANDINGS = st.integers(0, 3)  # an attempt stops after this many of its writes landed
# Record times on the scale of the gap and the segments: sessions that grow, merge and span segments.
AHEAD_MS = (0, 0, 20_000, 45_000, 120_000, 900_000)
AFTER_MS = (0, 1_000, 20_000, 50_000, 100_000, 1_000_000)


@dataclass(frozen=True)
class TaskFaults:
    """What befalls the batch's task: its first attempts die after `deaths[i]` landings each
    (the last attempt then completes); `speculative`: (starts late, stops after n landings), an
    attempt that stops after n landings and goes on later (`starts late`: it reads and plans
    only then, after its successor), or None."""

    deaths: tuple[int, ...] = ()
    speculative: tuple[bool, int] | None = None


@dataclass
class OldAttempt:
    """An attempt still running after its successor: its start (read, plan, first landings),
    if not yet made, then its remaining landings, one per event."""

    what: str
    start: Callable[[], list[Landing]] | None
    pending: list[Landing] = field(default_factory=list)

    def step(self) -> str:
        if self.start is not None:
            self.pending, self.start = self.start(), None
            return f"{self.what}: read, planned and wrote, {len(self.pending)} landing(s) to go"
        self.pending.pop(0).run()
        return f"{self.what}: one more landing, {len(self.pending)} to go"

    @property
    def done(self) -> bool:
        return self.start is None and not self.pending


@dataclass
class SessionWorld:
    """The session store's table and the old attempts still running."""

    table: FakeSessionTable = field(default_factory=lambda: FakeSessionTable(SPEC))
    old_attempts: list[OldAttempt] = field(default_factory=list)


def session_batch(
    records: list[Record], limit_ms: int | None, stream_time: int | None
) -> tuple[list[KeyTimes], list[DeadLetterKey], int | None]:
    """windowed.session_deltas and the dead letters (transforms.dead_letter_rows,
    windowed.late_letter_rows): each word's on-time event times, ascending; the records that
    cannot be counted (no value, too far ahead, late: SessionSpec.late); the latest on-time
    time (the batch's max_time_ms)."""
    times: dict[str, list[int]] = {}
    letters = []
    for record in records:
        reason = dead_letter_reason(record, limit_ms)
        words = [] if reason else tokenize(record.value or "")
        if reason is None and words and SPEC.windowing.late(record.time_ms, stream_time):
            reason = deadletters.LATE
        if reason is not None:
            letters.append(DeadLetterKey(record.partition, record.offset, reason))
            continue
        for word in words:
            times.setdefault(word, []).append(record.time_ms)
    deltas = [KeyTimes(Delta(word.encode(), len(ts), max(ts)), tuple(sorted(ts))) for word, ts in sorted(times.items())]
    latest = max((max(each) for each in times.values()), default=None)
    return deltas, letters, latest


class SessionStreamJob(StreamJob):
    """driver.StreamJob whose batches apply to the session store (see the module doc). The
    machine sets `faults` before each trigger."""

    faults: TaskFaults = TaskFaults()
    values: ClassVar[SessionValues] = COUNTS  # what a session's value is (apply_session_deltas' values)

    @property
    def sessions(self) -> SessionWorld:
        return self.world.sessions

    def apply_batch(self, records: list[Record], position: BatchPosition, write_order: int) -> Iterator[Step]:
        """batch_apply._apply_batch for a session store: begun, the apply (one task,
        session_applier: apply_session_deltas on the task's rows; with the apply cache on,
        keys past the stream time are not read: here on odd `write_order`s), the dead letters,
        recorded."""
        max_future = position.max_future_ms
        batch_id, write_ts = position.batch_id, position.write_ts
        limit = future_limit_ms(write_ts, max_future)
        self.cassandra.begin_batch(position, self.epoch)
        yield Step("begin", f"batch {batch_id} begun (write_ts {write_ts}, limit {limit})", position, max_future)

        deltas, letters, latest = self.batch_of(records, limit, position)
        after = position.stream_time_ms if write_order % 2 else None
        table = self.sessions.table

        def attempt(rows: AttemptRows) -> None:
            apply_session_deltas(rows, table.spec, batch_id, deltas, write_ts, stream_time_ms=after, values=self.values)

        faults = self.faults
        if faults.speculative is not None and deltas:
            late, stop = faults.speculative
            what = f"batch {batch_id}'s speculative attempt"

            def start() -> list[Landing]:
                rows = AttemptRows(table, write_order * 31, stop, pause=True)
                attempt(rows)
                return rows.pending

            old = OldAttempt(what, start)
            if not late:
                old.step()
            if not old.done:
                self.sessions.old_attempts.append(old)
        for number, dies_after in enumerate((*faults.deaths, None), 1):
            rows = AttemptRows(table, write_order * 31 + number, dies_after)
            try:
                attempt(rows)
            except AttemptDied:
                what = f"batch {batch_id}: task attempt {number} died after {rows.landed} landing(s)"
                yield Step("write", what, position, max_future)
                continue
            what = f"batch {batch_id}: task attempt {number} wrote its changes ({rows.landed} landing(s))"
            yield Step("write", what, position, max_future)
            break

        if letters:
            for letter in letters:
                self.cassandra.write_dead_letter(letter, batch_id, position.write_ts)
            yield Step("dead letters", f"batch {batch_id}: {len(letters)} dead letter(s) written", position, max_future)
        self.cassandra.record_batch(position, latest, self.epoch)
        yield Step("record", f"batch {batch_id} recorded, ending at {position.end.as_json()}", position, max_future)

    def batch_of(
        self, records: list[Record], limit_ms: int | None, position: BatchPosition
    ) -> tuple[list[KeyTimes], list[DeadLetterKey], int | None]:
        """The batch's KeyTimes as the apply takes them, its dead letters and its latest
        counted time (session_batch)."""
        return session_batch(records, limit_ms, position.stream_time_ms)


# --- the truth ---


def session_fate(record: Record, write_ts: int, max_future_ms: int, stream_time: int | None) -> str | None:
    """Why a session store's batch of `write_ts` under `max_future_ms` that began at
    `stream_time` does not count `record` (None: it does)."""
    reason = uncountable_reason(record, write_ts, max_future_ms)
    late = stream_time is not None and record.time_ms + GRACE_MS < stream_time
    if reason is None and late and tokenize(record.value):
        return deadletters.LATE
    return reason


class TruthSession(NamedTuple):
    """A session of the truth: its bounds and the counted records in it (a record once per
    time its key counts it: the word count's once per occurrence of the word)."""

    start_ms: int
    end_ms: int
    records: tuple[Record, ...]


def sessionize(records: list[Record]) -> list[TruthSession]:
    """The sessions of `records`' event times: cut where two are more than the gap apart."""
    sessions: list[list] = []
    for record in sorted(records, key=lambda r: r.time_ms):
        if sessions and record.time_ms - sessions[-1][1] <= GAP_MS:
            sessions[-1][1] = record.time_ms
            sessions[-1][2].append(record)
        else:
            sessions.append([record.time_ms, record.time_ms, [record]])
    return [TruthSession(start, end, tuple(held)) for start, end, held in sessions]


def key_problem(
    have: list[SessionEntry],
    before: list[TruthSession],
    after: list[TruthSession] | None,
    differs: Callable[[SessionEntry, TruthSession], str | None],
) -> bool:
    """Whether a key's stored sessions `have` break the truth: they must be `before` (the truth
    of the recorded batches), or with the unfinished batch's sessions `after` (None: none
    known), each session of `after` either not written yet (what it merges still there) or
    written (with any of what it merges not deleted yet). A stored session is a truth's when
    their bounds are equal and `differs` (how its value differs from the truth's records) says
    None."""

    def among(entry: SessionEntry, sessions: list[TruthSession]) -> bool:
        return any(
            (entry.start_ms, entry.end_ms) == (s.start_ms, s.end_ms) and differs(entry, s) is None for s in sessions
        )

    def same(entries: list[SessionEntry], sessions: list[TruthSession]) -> bool:
        return len(entries) == len(sessions) and all(among(e, sessions) for e in entries)

    if same(have, before):
        return False
    if after is None or len({(e.start_ms, e.end_ms) for e in have}) != len(have):
        return True
    placed = 0
    for merged in after:
        parts = [s for s in before if merged.start_ms <= s.start_ms and s.end_ms <= merged.end_ms]
        inside = [e for e in have if merged.start_ms <= e.start_ms and e.end_ms <= merged.end_ms]
        placed += len(inside)
        if same(inside, parts):
            continue
        written = [e for e in inside if among(e, [merged])]
        if not (written and all(among(e, parts) for e in inside if e is not written[0])):
            return True
    return placed != len(have)


@dataclass
class SessionTruth(Truth):
    """truth.Truth for the session store (see the module doc)."""

    table: FakeSessionTable | None = None

    def record_fate(self, record: Record, write_ts: int, rule: int, stream_time: int | None) -> str | None:
        """Why the batch of `write_ts` under `rule` that began at `stream_time` does not count
        `record` (None: it does; session_fate)."""
        return session_fate(record, write_ts, rule, stream_time)

    def keys_of(self, record: Record) -> list[bytes]:
        """The keys a counted record counts under: its words, once per occurrence."""
        return [word.encode() for word in tokenize(record.value)]

    def session_problem(self, entry: SessionEntry, session: TruthSession) -> str | None:
        """How a stored session's value differs from the truth's session of the same bounds
        (None: it does not): the word count's, its events."""
        count = decode_long(entry.value)
        return None if count == len(session.records) else f"{count} events (truth {len(session.records)})"

    def value_shown(self, entry: SessionEntry):
        """A stored session's value as a report shows it."""
        return decode_long(entry.value)

    def observe(self, step: Step) -> None:
        if step.kind not in ("write", "dead letters", "record"):
            return
        position = step.position
        rule = self.rule_of.setdefault((position.batch_id, position.write_ts), step.max_future_ms)
        if step.kind == "record":
            for record in self.topic.read(self.topic.of(position.start), self.topic.of(position.end)):
                if record.coordinates not in self.fate:
                    self.fate[record.coordinates] = self.record_fate(
                        record, position.write_ts, rule, position.stream_time_ms
                    )

    def violations(self, cassandra: FakeCassandra) -> Violations:
        progress = cassandra.progress()
        covered = self.topic.of(KafkaOffsets.parse_stored(progress.offsets))
        problems: list[str] = []
        counted: dict[bytes, list[Record]] = defaultdict(list)
        letters: set[DeadLetterKey] = set()
        for record in self.topic.records():
            if record.offset >= covered.get(record.partition, 0):
                continue
            if record.coordinates not in self.fate:
                problems.append(f"record p{record.partition}@{record.offset} is below the store's offsets, unread")
                continue
            self._tally(record, self.fate[record.coordinates], counted, letters)

        unfinished = progress.unfinished_batch
        rule = None if unfinished is None else self.rule_of.get((unfinished, progress.pending_ts))
        pending: dict[bytes, list[Record]] = defaultdict(list)
        pending_letters: set[DeadLetterKey] = set()
        if rule is not None:
            end = self.topic.of(KafkaOffsets.parse_stored(progress.pending_offsets))
            began_at = stream_time_ms(progress)
            for record in self.topic.read(covered, end):
                fate = self.record_fate(record, progress.pending_ts, rule, began_at)
                self._tally(record, fate, pending, pending_letters)

        stored = self.table.settled()
        for key in sorted(set(stored) | set(counted)):
            have = sorted(stored.get(key, []), key=_by_start)
            before = sessionize(counted[key])
            after = sessionize(counted[key] + pending[key]) if rule is not None else None
            if key_problem(have, before, after, self.session_problem):
                problems.append(self._key_report(key, have, before, after, unfinished))
        held = set(cassandra.dead_letters)
        missing = [f"dead letter {_shown(letter)} missing" for letter in sorted(letters - held, key=_order)]
        unexpected = [
            f"dead letter {_shown(letter)} unexpected (written by batch {cassandra.dead_letters[letter]})"
            for letter in sorted(held - letters - pending_letters, key=_order)
        ]
        logged = "; ".join(batch.describe() for batch in self.table.batch_log)
        registry = f"registry: {cassandra.describe_progress()}" + (f"; batch log: {logged}" if logged else "")
        return Violations(registry, problems, missing, unexpected)

    def _tally(self, record: Record, reason: str | None, counted: dict, letters: set) -> None:
        if reason is not None:
            letters.add(DeadLetterKey(record.partition, record.offset, reason))
            return
        for key in self.keys_of(record):
            counted[key].append(record)

    def _key_report(
        self,
        key: bytes,
        have: list[SessionEntry],
        before: list[TruthSession],
        after: list[TruthSession] | None,
        unfinished: int | None,
    ) -> str:
        """A key whose sessions break the truth: its stored sessions (bounds, value, batch), the
        truth's (bounds, records), and how each stored one differs from the truth's of its bounds."""
        stored = [(e.start_ms, e.end_ms, self.value_shown(e)) for e in have]
        tags = [e.batch_id for e in have]
        wrong = []
        for entry in have:
            for session in (*before, *(after or ())):
                if (entry.start_ms, entry.end_ms) == (session.start_ms, session.end_ms):
                    differs = self.session_problem(entry, session)
                    if differs:
                        wrong.append(f"[{entry.start_ms}, {entry.end_ms}]: {differs}")
                    break
        return (
            f"key {key.decode()!r}: stored {stored} (batches {tags}), truth {_bounds(before)}"
            + ("" if after is None else f" or, with batch {unfinished}, {_bounds(after)}")
            + (f"; {'; '.join(wrong)}" if wrong else "")
        )


def _bounds(sessions: list[TruthSession]) -> list[tuple[int, int, int]]:
    """The truth's sessions as a report shows them: (start, end, records)."""
    return [(s.start_ms, s.end_ms, len(s.records)) for s in sessions]


def _by_start(entry: SessionEntry) -> tuple[int, int]:
    return entry.start_ms, entry.end_ms


def _shown(letter: DeadLetterKey) -> str:
    return f"p{letter.partition}@{letter.offset} ({letter.reason})"


def _order(letter: DeadLetterKey) -> tuple[int, int, str]:
    return letter.partition, letter.offset, letter.reason


# --- the machine ---


class SessionProtocolMachine(BatchProtocolMachine):
    """BatchProtocolMachine over a session store, with task attempts and the batch log."""

    job_class: ClassVar[type[StreamJob]] = SessionStreamJob

    def __init__(self) -> None:
        super().__init__()
        self.sessions = SessionWorld()
        self.world.sessions = self.sessions
        self.truth = SessionTruth(self.world.topic, table=self.sessions.table)

    @rule(partition=st.integers(0, MAX_PARTITIONS - 1), words=st.lists(st.sampled_from(WORDS), max_size=3),
          null=st.booleans(), ahead_ms=st.sampled_from(AHEAD_MS), after_ms=st.sampled_from(AFTER_MS))  # fmt: skip
    def produce(self, partition: int, words: list[str], null: bool, ahead_ms: int, after_ms: int) -> None:
        """BatchProtocolMachine.produce, at times on the scale of the session gap."""
        super().produce(partition, words, null, ahead_ms, after_ms)

    @precondition(lambda self: self.job is not None)
    @rule(crash_at=STEP_INDEX, backup_at=STEP_INDEX, order=st.integers(0, 3), deaths=st.lists(LANDINGS, max_size=2),
          speculative=st.none() | st.tuples(st.booleans(), LANDINGS))  # fmt: skip
    def trigger(
        self,
        crash_at: int | None,
        backup_at: int | None,
        order: int,
        deaths: list[int],
        speculative: tuple[bool, int] | None,
    ) -> None:
        """The query's next micro-batch (as BatchProtocolMachine.trigger); its task's first
        attempts die after `deaths` landings each, and `speculative` (starts late, stops after
        n landings) runs an attempt that goes on after its successor."""
        self.job.faults = TaskFaults(tuple(deaths), speculative)
        self._run(self.job.trigger(order), crash_at, backup_at)

    @precondition(lambda self: self.sessions.table.batch_log)
    @rule(which=st.integers(0, 3))
    def batch_log_replays(self, which: int) -> None:
        """Cassandra's batch log applies a LOGGED batch whose coordinator lost it half way."""
        log = self.sessions.table.batch_log
        batch = self.sessions.table.replay(which % len(log))
        self.steps = [f"the batch log applied {batch.describe()}"]

    @precondition(lambda self: self.sessions.old_attempts)
    @rule(which=st.integers(0, 3))
    def old_attempt_goes_on(self, which: int) -> None:
        """An attempt that still runs after its successor takes its next step."""
        attempts = self.sessions.old_attempts
        old = attempts[which % len(attempts)]
        self.steps = [old.step()]
        if old.done:
            attempts.remove(old)
