"""The one invariant: the store equals the truth of the input its recorded batches cover.

The truth is computed from the topic's committed records (Kafka transactions: never one of an
aborted or open transaction, nor a control record), never from the store, and from the topic
the store's batches read (its id the registry's `topic_id`: after the topic was deleted and
created again, the records of the one deleted): every record below the registry's `offsets`
(the end of the store's last recorded batch) is counted, each of its words once, unless it
cannot be counted; then it is a dead letter instead. A record cannot be counted when it has no
value, or when its time is after its batch's future limit: the write timestamp of the first
recorded batch whose range holds it, plus the `--max-future` of the run that first wrote
anything of that batch to the store (a key or a dead letter; a batch that wrote nothing before
it was recorded: the run that recorded it). That is when a batch's decisions become visible, so
a replay must keep them: a run that crashed after beginning a batch and before writing any of
it has decided nothing yet.

Retention (statestore.core.retention, the registry's `retention_ms`): a batch that counts a key
whose value is dated before the batch's cutoff (the stream time before the batch, the largest
time of the words counted by the batches before it, minus the retention the batch first wrote
under) counts it from zero; and an entry dated before the cutoff now (the registry's stream time
and retention) is absent, in the store as in the truth.

The one allowance: the store's unfinished batch (begun, not recorded) may be half written. A
key tagged with that batch holds the truth plus that batch's delta (its recorded range, by its
rule), and its dead letters may or may not be there yet. Every other key, and every other dead
letter, is exactly the truth. So a key tagged with a batch the registry no longer knows of, or a
record that is neither counted nor dead-lettered, breaks it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from statestore.core.codecs import decode_long, millis_of
from statestore.core.retention import cutoff_ms, expired
from statestore.store.book import deadletters
from statestore.store.book.registry import KafkaOffsets
from statestore.stream.tokenize import tokenize
from statestore.stream.transforms import future_limit_ms, is_future_time
from tests.simulation.driver import Step
from tests.simulation.fake_cassandra import DeadLetterKey, FakeCassandra
from tests.simulation.fake_kafka import FakeTopic, Record

COMMITTED = "read_committed"  # the truth counts committed records only, whatever the job reads


def uncountable_reason(record: Record, write_ts: int, max_future_ms: int) -> str | None:
    """Why `record` cannot be counted by a batch of `write_ts` under `max_future_ms` (None: it can)."""
    if record.value is None:
        return deadletters.NULL_VALUE
    if is_future_time(record.time_ms, future_limit_ms(write_ts, max_future_ms)):
        return deadletters.FUTURE
    return None


@dataclass
class Tally:
    """Counts, latest times and dead letters of a set of records."""

    counts: Counter[bytes] = field(default_factory=Counter)
    times: dict[bytes, int] = field(default_factory=dict)
    letters: set[DeadLetterKey] = field(default_factory=set)

    def add(self, record: Record, reason: str | None) -> None:
        if reason is not None:
            self.letters.add(DeadLetterKey(record.partition, record.offset, reason))
            return
        for word in tokenize(record.value):
            key = word.encode()
            self.counts[key] += 1
            self.times[key] = max(self.times.get(key, record.time_ms), record.time_ms)


@dataclass
class Truth:
    """The oracle: what each batch decided, and what the store must hold (see the module doc)."""

    topic: FakeTopic
    # (batch id, write timestamp) -> the --max-future its first write was made under
    rule_of: dict[tuple[int, int], int] = field(default_factory=dict)
    # (partition, offset) -> why the record cannot be counted (None: it is counted), fixed by
    # the first recorded batch whose range holds it
    fate: dict[tuple[int, int], str | None] = field(default_factory=dict)
    learned: int = 0  # how many of the registry's committed record_batch positions were learned
    # (batch id, write timestamp) -> the retention its first write was made under
    retention_of: dict[tuple[int, int], int | None] = field(default_factory=dict)
    history: list[tuple[int, int]] = field(default_factory=list)  # the recorded batches, in order
    decided_by: dict[tuple[int, int], int] = field(default_factory=dict)  # record -> its batch in history

    def observe(self, step: Step) -> None:
        """Learn from one step of the driver what a batch decided."""
        if step.kind not in ("write", "dead letters", "record"):
            return
        position = step.position
        rule = self.rule_of.setdefault((position.batch_id, position.write_ts), step.max_future_ms)
        self.retention_of.setdefault((position.batch_id, position.write_ts), position.retention_ms)
        if step.kind == "record":
            self._recorded(position, rule)

    def _recorded(self, position, rule: int, topic: FakeTopic | None = None) -> None:
        batch = (position.batch_id, position.write_ts)
        if batch not in self.history:
            self.history.append(batch)
        topic = topic or self.topic
        for record in topic.read(topic.of(position.start), topic.of(position.end), COMMITTED):
            if record.coordinates not in self.fate:
                self.fate[record.coordinates] = uncountable_reason(record, position.write_ts, rule)
                self.decided_by[record.coordinates] = self.history.index(batch)

    def _learn(self, cassandra: FakeCassandra) -> None:
        """Learn the batches recorded by a transaction that committed before its driver's step
        said so (one that timed out, applied, or was committed by a later Paxos round)."""
        topic = self.topic.as_of(cassandra.progress().topic_id)
        for position in cassandra.recorded[self.learned :]:
            rule = self.rule_of.setdefault((position.batch_id, position.write_ts), position.max_future_ms)
            self.retention_of.setdefault((position.batch_id, position.write_ts), position.retention_ms)
            if topic is self.topic:  # (the kinds' own _recorded read self.topic: only the key-value kind's topic
                self._recorded(position, rule)  # is ever created again, kafka_events.topic_created_again)
            else:
                self._recorded(position, rule, topic)
        self.learned = len(cassandra.recorded)

    def forget(self, cassandra: FakeCassandra) -> None:
        """The store was reset: no batch of it is recorded any more."""
        self.rule_of.clear()
        self.retention_of.clear()
        self.fate.clear()
        self.history.clear()
        self.decided_by.clear()
        self.learned = len(cassandra.recorded)

    def violations(self, cassandra: FakeCassandra) -> Violations:
        """How the store differs from the truth (none: it holds the invariant)."""
        self._learn(cassandra)
        progress = cassandra.progress()
        topic = self.topic.as_of(progress.topic_id)  # the topic the store's batches read (created again since?)
        covered = topic.of(KafkaOffsets.parse_stored(progress.offsets))
        problems: list[str] = []  # of the counts
        missing: list[str] = []  # dead letters
        unexpected: list[str] = []
        truth = Tally()
        by_batch: dict[int, Tally] = {}
        for record in topic.records(COMMITTED):
            if record.offset >= covered.get(record.partition, 0):
                continue
            if record.coordinates not in self.fate:
                problems.append(f"record {_shown(record)} is below the store's offsets, but no recorded batch read it")
                continue
            truth.add(record, self.fate[record.coordinates])
            by_batch.setdefault(self.decided_by[record.coordinates], Tally()).add(record, self.fate[record.coordinates])
        state: dict[bytes, tuple[int, int | None]] = {}
        stream_time = None
        for index, batch in enumerate(self.history):
            stream_time = _counted(state, by_batch.get(index, Tally()), self.retention_of.get(batch), stream_time)

        unfinished = progress.unfinished_batch
        pending = Tally()
        pending_fate: dict[tuple[int, int], str | None] = {}
        rule = None if unfinished is None else self.rule_of.get((unfinished, progress.pending_ts))
        if rule is not None:
            end = topic.of(KafkaOffsets.parse_stored(progress.pending_offsets))
            for record in topic.read(covered, end, COMMITTED):
                pending_fate[record.coordinates] = uncountable_reason(record, progress.pending_ts, rule)
                pending.add(record, pending_fate[record.coordinates])

        with_pending = dict(state)
        if rule is not None:
            _counted(with_pending, pending, self.retention_of.get((unfinished, progress.pending_ts)), stream_time)
        now = None if progress.max_event_time is None else millis_of(progress.max_event_time)
        cutoff = cutoff_ms(progress.retention_ms, now)  # what reads leave out now
        for key in sorted(set(cassandra.rows) | set(state)):
            row = cassandra.rows.get(key)
            want = state.get(key, (0, None))
            if row is not None and unfinished is not None and row.entry.batch_id == unfinished:
                want = with_pending.get(key, (0, None))
            if expired(want[1], cutoff):
                want = (0, None)
            have = (0, None) if row is None else (decode_long(row.entry.value), row.entry.time_ms)
            if row is not None and expired(row.entry.time_ms, cutoff):
                have = (0, None)
            if have != want:
                tag = "absent" if row is None else f"tagged batch {row.entry.batch_id}"
                problems.append(
                    f"key {key.decode()!r}: stored {have[0]} ({tag}, time {have[1]}), truth {want[0]} (time {want[1]})"
                )

        stored_letters = set(cassandra.dead_letters)
        for letter in sorted(truth.letters - stored_letters, key=_letter_order):
            missing.append(f"dead letter {_letter(letter)} missing: by its batch's rule the record cannot be counted")
        for letter in sorted(stored_letters - truth.letters - pending.letters, key=_letter_order):
            coordinates = letter.partition, letter.offset
            if coordinates in self.fate:
                fate = self.fate[coordinates]
                said = "a recorded batch counted the record" if fate is None else f"a recorded batch decided {fate}"
            elif coordinates in pending_fate:
                fate = pending_fate[coordinates]
                said = (
                    f"the unfinished batch {unfinished} counts the record (by the --max-future {rule} it first wrote "
                    "under)"
                    if fate is None
                    else f"the unfinished batch {unfinished} decided {fate}"
                )
            else:
                said = "no batch the store knows of read the record"
            written_by = cassandra.dead_letters[letter]
            unexpected.append(f"dead letter {_letter(letter)} unexpected (written by batch {written_by}): {said}")
        return Violations(f"registry: {cassandra.describe_progress()}", problems, missing, unexpected)


@dataclass(frozen=True)
class Violations:
    """How the store differs from the truth: its counts (a key's value or time, or input it
    claims and never read), dead letters missing (records the store neither counted nor kept,
    unless a count is wrong too) and dead letters it should not hold."""

    registry: str
    counts: list[str]
    missing_dead_letters: list[str]
    unexpected_dead_letters: list[str]

    def __bool__(self) -> bool:
        return bool(self.counts or self.missing_dead_letters or self.unexpected_dead_letters)

    def lines(self) -> list[str]:
        return [self.registry, *self.counts, *self.missing_dead_letters, *self.unexpected_dead_letters]


def _counted(
    state: dict[bytes, tuple[int, int | None]], batch: Tally, retention_ms: int | None, stream_time: int | None
) -> int | None:
    """A batch's counts added to `state` (key -> count, latest time) by the retention rule: a
    key dated before the batch's cutoff counts from zero. Returns the stream time after it."""
    cutoff = cutoff_ms(retention_ms, stream_time)
    for key, amount in batch.counts.items():
        count, time = state.get(key, (0, None))
        if expired(time, cutoff):
            count, time = 0, None
        latest = batch.times[key]
        state[key] = (count + amount, latest if time is None else max(time, latest))
    times = [t for t in (stream_time, *batch.times.values()) if t is not None]
    return max(times) if times else None


def _shown(record: Record) -> str:
    return f"p{record.partition}@{record.offset} {record.value!r}"


def _letter(letter: DeadLetterKey) -> str:
    return f"p{letter.partition}@{letter.offset} ({letter.reason})"


def _letter_order(letter: DeadLetterKey) -> tuple[int, int, str]:
    return letter.partition, letter.offset, letter.reason
