"""The aggregate store kind in the simulator (issue 47): the key-value kind's protocol (the same
machine, driver, registry, lease and epochs, paused drivers, registry timeouts, resets,
set-retention, crashes, replays and checkpoint restores) with JSON records aggregated into a
key-value store through the real statestore.core.aggregation (AggregateSpec, each kind's
from_partial, merge and codec, and plan_aggregates, the replay-safe rule), with a measure of
every aggregation: count, sum_int, sum, min, max, latest and distinct.

The input stage is mirrored over values (the stream's is Spark SQL over VARIANT): a record is
JSON, an object, its key `k` (a string as it is, another value as its JSON text), the fields
its measures read present (a JSON null counts as missing) and of the type each takes. Its
reasons, in json_input's order: null_value, invalid_json, missing_key, missing_field,
wrong_type, overflow (an integer beyond a long for sum_int, a number beyond a double), and last
future (too far ahead: the batch's --max-future rule, as for word counts). A batch's partial per
key is what the measures' partial_sql compute (count, exact sum, sum of doubles, min, max, the latest value by time,
partition and offset, an HLL sketch of the values' JSON text), passed through each kind's
from_partial. The apply is one or more Spark tasks (the keys hashed into 1 to 3 of them): each
attempt reads its keys, plans with plan_aggregates and writes, its writes landing one at a time
in any order; a task's first attempts may die after any landing, and a speculative attempt may
land its writes after its successor, or read and plan only then, even once later batches ran.

The truth never parses: each record is modelled when produced (its key, its fields, and the
reason it is bad, if it is), and every key's value must be the brute-force aggregate of the
counted records its recorded batches cover (by the retention rule, as for word counts): count,
sum_int and min/max/latest exactly, sum within 1e-9 of the sum of the values' magnitudes
(doubles added in another order differ by rounding only), and distinct's estimate equal to the
estimate of one sketch built from all those values. Equal, not within the sketch's error bound:
the values come from a handful of distinct ones, so every sketch stays in its exact (list or
set of coupons) mode, where the estimate is a function of the set of values, which a union
keeps exactly; a bound would let a lost or doubled batch through. The bad records must be
exactly the dead letters, each with the reason it was modelled with. The allowance for the
store's unfinished batch is the key-value kind's.
"""

from __future__ import annotations

import json
import math
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar

import datasketches
from cassandra import InvalidRequest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from statestore.core.aggregation import AggregateDelta, AggregateSpec, plan_aggregates
from statestore.core.aggregation.kinds import INTEGER, NUMBER
from statestore.core.aggregation.kinds.distinct import LG_K
from statestore.core.codecs import millis_of
from statestore.core.model import Entry
from statestore.core.retention import cutoff_ms, expired
from statestore.store.book import deadletters
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.stream.transforms import future_limit_ms
from tests.simulation.driver import Step, StreamJob, dead_letter_reason
from tests.simulation.fake_cassandra import DeadLetterKey, FakeCassandra
from tests.simulation.fake_kafka import Record
from tests.simulation.fake_sessions import Landing
from tests.simulation.machine import AFTER_MS, AHEAD_MS, MAX_PARTITIONS, STEP_INDEX, BatchProtocolMachine
from tests.simulation.sessions import OldAttempt
from tests.simulation.truth import Truth, Violations, uncountable_reason

SPEC = AggregateSpec.parse(
    "n=count(), total=sum_int(qty), s=sum(amount), hi=max(amount), lo=min(amount), last=latest(pos), u=distinct(user)"
)
KEY_FIELD = "k"

# The reasons of the JSON input stage (statestore.stream.json_input).
INVALID_JSON, MISSING_KEY, MISSING_FIELD = deadletters.INVALID_JSON, deadletters.MISSING_KEY, deadletters.MISSING_FIELD
WRONG_TYPE, OVERFLOW = deadletters.WRONG_TYPE, deadletters.OVERFLOW
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

# The values records carry: a number key beside string ones; sums past a long (sum_int is
# exact beyond it); doubles of many magnitudes; any JSON for latest and distinct.
KEYS = ("a", "b", "c", 7)
QTYS = (1, 0, -3, 2**62, LONG_MIN)
AMOUNTS = (2.5, 0.1, -3.75, 7, -2, 1e-3, 1e12)
POSITIONS = (1, "x", 2.25, {"lat": 1.5}, [1, 2], True)
USERS = ("u1", "u2", "u3", 5, {"id": 1})

# How a produced record is bad (None: it is not), and the reason its dead letter must carry.
FAULTS: dict[str | None, str | None] = {
    None: None,
    "not JSON": INVALID_JSON,
    "not an object": INVALID_JSON,
    "no key": MISSING_KEY,
    "a null key": MISSING_KEY,
    "no pos": MISSING_FIELD,
    "a null user": MISSING_FIELD,
    "qty a double": WRONG_TYPE,
    "amount a string": WRONG_TYPE,
    "qty past a long": OVERFLOW,
    "amount past a double": OVERFLOW,
}
FAULT = st.sampled_from((None,) * 20 + tuple(f for f in FAULTS if f))  # two records in three are good
TASKS = st.sampled_from((1, 1, 2, 3))
LANDINGS = st.integers(0, 3)  # an attempt dies (or stops) after this many of its writes landed
SPECULATIVE = st.none() | st.tuples(st.booleans(), LANDINGS)  # (starts late, stops after n landings)


@dataclass(frozen=True)
class Modelled:
    """What a produced record is, known without parsing it: its key's text, its fields, and why
    it cannot be counted (None: it can)."""

    key: str | None
    fields: dict[str, Any]
    reason: str | None


def compact(value: Any) -> str:
    """A JSON value's text (Spark's to_json of a variant: no spaces)."""
    return json.dumps(value, separators=(",", ":"))


def key_text(value: Any) -> str:
    """--key FIELD's key: a string's own text, any other value's JSON text."""
    return value if isinstance(value, str) else compact(value)


def produced(key: Any, qty: int, amount: float, pos: Any, user: Any, fault: str | None) -> tuple[str, Modelled]:
    """The JSON text of a record with these fields, made bad as `fault` says, and its model."""
    fields = {KEY_FIELD: key, "qty": qty, "amount": amount, "pos": pos, "user": user}
    modelled = Modelled(key_text(key), dict(fields), FAULTS[fault])
    if fault == "not JSON":
        return compact(fields)[:-1], modelled
    if fault == "not an object":
        return compact([fields]), modelled
    big = None
    if fault == "no key":
        del fields[KEY_FIELD]
    elif fault == "a null key":
        fields[KEY_FIELD] = None
    elif fault == "no pos":
        del fields["pos"]
    elif fault == "a null user":
        fields["user"] = None
    elif fault == "qty a double":
        fields["qty"] = qty + 0.5
    elif fault == "amount a string":
        fields["amount"] = str(amount)
    elif fault == "qty past a long":
        fields["qty"] = LONG_MAX + 1 + abs(qty)
    elif fault == "amount past a double":
        fields["amount"], big = "@big@", "1e400"
    text = compact(fields)
    return (text if big is None else text.replace('"@big@"', big)), modelled


def produce_json(machine, partition: int, fields: tuple, null: bool, ahead_ms: int, after_ms: int) -> None:
    """A machine's produce rule: `after_ms` later by its clock, the JSON record `produced(*fields)`
    makes (no value when `null`) on its topic, at `ahead_ms` from the clock (not before 0), its
    model kept in `machine.model`."""
    machine.world.clock_ms += after_ms
    topic = machine.world.topic
    text, modelled = produced(*fields)
    time_ms = max(0, machine.world.clock_ms + ahead_ms)
    record = topic.produce(partition % topic.partition_count, None if null else text, time_ms)
    machine.model[record.coordinates] = modelled


# --- the input stage and the partials (the driver's side: it parses) ---


def input_reason(value: str) -> tuple[str | None, str | None, dict[str, Any]]:
    """The JSON input stage over one record's value: (the reason it cannot be counted or None,
    its key's text, its fields by name)."""
    try:
        record = json.loads(value)
    except ValueError:
        return INVALID_JSON, None, {}
    if not isinstance(record, dict):
        return INVALID_JSON, None, {}
    if record.get(KEY_FIELD) is None:
        return MISSING_KEY, None, {}
    fields = {}
    for measure in SPEC.measures:
        name = measure.field
        if name is None or name in fields:
            continue
        found = record.get(name)
        if found is None:
            return MISSING_FIELD, None, {}
        takes = measure.aggregation.takes
        number = isinstance(found, int | float) and not isinstance(found, bool)
        if takes in (NUMBER, INTEGER) and not number:
            return WRONG_TYPE, None, {}
        if takes is INTEGER and isinstance(found, float):
            return WRONG_TYPE, None, {}
        if takes is INTEGER and not LONG_MIN <= found <= LONG_MAX:
            return OVERFLOW, None, {}
        if takes is NUMBER and not math.isfinite(found):
            return OVERFLOW, None, {}
        fields[name] = found
    return None, key_text(record[KEY_FIELD]), fields


def sketch_of(texts) -> bytes:
    """hll_sketch_agg(column, LG_K) over these texts: a sketch's bytes."""
    sketch = datasketches.hll_sketch(LG_K)
    for text in texts:
        sketch.update(text)
    return sketch.serialize_compact()


def partial_of(rows: list[tuple[Record, dict[str, Any]]]) -> tuple:
    """One key's partial accumulators of a batch (what each measure's partial_sql computes over
    the key's records), through each kind's from_partial."""
    values = []
    for measure in SPEC.measures:
        column = [fields[measure.field] for _, fields in rows] if measure.field else []
        kind = measure.kind
        if kind == "count":
            value = len(rows)
        elif kind in ("sum_int", "sum"):
            value = sum(column) if kind == "sum_int" else sum(float(v) for v in column)
        elif kind in ("min", "max"):
            value = (min if kind == "min" else max)(float(v) for v in column)
        elif kind == "latest":
            value = max((r.time_ms, r.partition, r.offset, compact(f[measure.field])) for r, f in rows)
        else:
            value = sketch_of(compact(v) for v in column)
        values.append(measure.aggregation.from_partial(value))
    return tuple(values)


def aggregate_batch(records: list[Record], limit_ms: int | None) -> tuple[list[AggregateDelta], list[DeadLetterKey]]:
    """The batch's deltas (one per key, in key order) and its dead letters."""
    by_key: dict[str, list[tuple[Record, dict[str, Any]]]] = {}
    letters = []
    for record in records:
        reason, key, fields = (deadletters.NULL_VALUE, None, {}) if record.value is None else input_reason(record.value)
        if reason is None:
            reason = dead_letter_reason(record, limit_ms)  # too far ahead: the last check
        if reason is not None:
            letters.append(DeadLetterKey(record.partition, record.offset, reason))
            continue
        by_key.setdefault(key, []).append((record, fields))
    deltas = [
        AggregateDelta(key.encode(), partial_of(rows), max(r.time_ms for r, _ in rows), len(rows))
        for key, rows in sorted(by_key.items())
    ]
    return deltas, letters


def task_of(key: bytes, tasks: int) -> int:
    """A key's task (Spark's hash partitioning of the batch's keys; any fixed hash will do)."""
    return zlib.crc32(key) % tasks


# --- the driver ---


@dataclass(frozen=True)
class TaskFaults:
    """What befalls a batch's tasks: their number; the task `seed` picks has its first attempts
    die after `deaths[i]` landings each and, with `speculative` (starts late, stops after n
    landings), an attempt that lands the rest of its writes after its successor (`starts
    late`: it reads and plans only then)."""

    tasks: int = 1
    seed: int = 0
    deaths: tuple[int, ...] = ()
    speculative: tuple[bool, int] | None = None


class AggregateStreamJob(StreamJob):
    """driver.StreamJob whose batches are aggregated (see the module doc). The machine sets
    `faults` before each trigger."""

    faults: TaskFaults = TaskFaults()

    @classmethod
    def protocol_faults(cls) -> bool:
        """The lease, paused drivers and registry timeouts are modelled: this apply's registry
        calls go through `_retried`; the reset is the key-value store's (same table shape)."""
        return True

    def apply_batch(self, records: list[Record], position: BatchPosition, write_order: int) -> Iterator[Step]:
        """batch_apply._apply_batch for an aggregate store: begun, the tasks' apply (read,
        plan_aggregates, write), the dead letters, recorded with the latest time counted."""
        max_future = position.max_future_ms
        batch_id, write_ts = position.batch_id, position.write_ts
        limit = future_limit_ms(write_ts, max_future)
        yield from self._retried("registry begin_batch", lambda: self.cassandra.begin_batch(position, self.epoch))
        yield Step("begin", f"batch {batch_id} begun (write_ts {write_ts}, limit {limit})", position, max_future)

        deltas, letters = aggregate_batch(records, limit)
        cutoff = cutoff_ms(position.retention_ms, position.stream_time_ms)
        faults = self.faults
        by_task: dict[int, list[AggregateDelta]] = {}
        for delta in deltas:
            by_task.setdefault(task_of(delta.key, faults.tasks), []).append(delta)
        rng = random.Random(faults.seed)
        chosen = rng.choice(sorted(by_task)) if by_task else None

        def planned(group: list[AggregateDelta], seed: int) -> list[Entry]:
            """One attempt's read and plan: its writes, in the order they land."""
            current = self.cassandra.read_entries([d.key for d in group])
            writes, _ = plan_aggregates(SPEC, current, group, batch_id, cutoff)
            if seed:
                random.Random(seed).shuffle(writes)
            return writes

        for task, group in sorted(by_task.items()):
            deaths = faults.deaths if task == chosen else ()
            if task == chosen and faults.speculative is not None:
                what = self._speculate(group, planned, faults.speculative, write_ts, write_order, batch_id, task)
                yield Step("write", what, position, max_future)
            for number, dies_after in enumerate((*deaths, None), 1):
                writes = planned(group, write_order)
                where = f"batch {batch_id} task {task} attempt {number}"
                landings = len(writes) if dies_after is None else min(dies_after, len(writes))
                for landed, entry in enumerate(writes[:landings], 1):
                    self._write_entry(entry, write_ts)
                    yield Step("write", f"{where}: key {entry.key.decode()!r} written ({landed} of {len(writes)})",
                               position, max_future)  # fmt: skip
                if dies_after is not None:
                    yield Step("write", f"{where} died after {landings} landing(s)", position, max_future)
                    continue
                break

        if letters:
            yield from self.dead_letters_written(letters, position, max_future)
        latest = max((d.time_ms for d in deltas), default=None)
        record = lambda: self.cassandra.record_batch(position, latest, self.epoch)  # noqa: E731
        yield from self._retried("registry record_batch", record)
        yield Step("record", f"batch {batch_id} recorded, ending at {position.end.as_json()}", position, max_future)

    def dead_letters_written(
        self, letters: list[DeadLetterKey], position: BatchPosition, max_future: int | None
    ) -> Iterator[Step]:
        """The batch's dead letters (aggregate_batch's), each at the batch's write timestamp."""
        for letter in letters:
            self.cassandra.write_dead_letter(letter, position.batch_id, position.write_ts)
        what = f"batch {position.batch_id}: {len(letters)} dead letter(s) written"
        yield Step("dead letters", what, position, max_future)

    def _speculate(self, group, planned, speculative, write_ts: int, write_order: int, batch_id: int, task: int) -> str:
        """A speculative attempt of the task: it reads and plans now (or, `starts late`, when it
        first goes on), lands `stop` writes, and the rest later, one per event
        (AggregateProtocolMachine.old_attempt_goes_on); a write to a table that is gone fails
        and lands nothing."""
        late, stop = speculative
        cassandra, generation = self.cassandra, self.generation

        def landing(entry: Entry) -> Landing:
            def run() -> None:
                try:
                    cassandra.write_entry(entry, write_ts, generation)
                except InvalidRequest:
                    pass  # the table is gone: this write of the attempt fails

            return Landing(run)

        def start() -> list[Landing]:
            landings = [landing(entry) for entry in planned(group, write_order + 7)]
            for each in landings[:stop]:
                each.run()
            return landings[stop:]

        old = OldAttempt(f"batch {batch_id} task {task}'s speculative attempt", start)
        what = f"{old.what} starts later"
        if not late:
            what = old.step()
        if not old.done:
            self.world.aggregate_attempts.append(old)
        return what


# --- the truth (it never parses: each record's model says what it is) ---


@lru_cache(maxsize=4096)
def distinct_estimate(texts: frozenset[str]) -> float:
    """The result of one sketch built from all these values' texts: its estimate, finished as
    the distinct measure finishes a stored sketch (to two decimals since de2eeee)."""
    (distinct,) = (m.aggregation for m in SPEC.measures if m.kind == "distinct")
    return distinct.finish(sketch_of(sorted(texts)))


def brute_force(records: list[Record], model: dict[tuple[int, int], Modelled]) -> dict[str, Any]:
    """Each measure's result over `records`, computed from their models alone."""
    fields = [model[r.coordinates].fields for r in records]
    latest = max(records, key=lambda r: (r.time_ms, r.partition, r.offset))
    return {
        "n": len(records),
        "total": sum(f["qty"] for f in fields),
        "s": math.fsum(float(f["amount"]) for f in fields),
        "hi": max(float(f["amount"]) for f in fields),
        "lo": min(float(f["amount"]) for f in fields),
        "last": model[latest.coordinates].fields["pos"],
        "u": distinct_estimate(frozenset(compact(f["user"]) for f in fields)),
    }


def result_problems(have: dict[str, Any], want: dict[str, Any], magnitude: float) -> list[str]:
    """The measures whose stored result is not the truth's: sum within 1e-9 of the magnitude of
    its terms (rounding of another order), latest as JSON, the others exactly."""
    wrong = []
    for measure in SPEC.measures:
        got, truth = have[measure.name], want[measure.name]
        if measure.kind == "sum":
            same = abs(got - truth) <= 1e-9 * magnitude
        elif measure.kind == "latest":
            same = json.dumps(got, sort_keys=True) == json.dumps(truth, sort_keys=True)
        else:
            same = got == truth and type(got) is type(truth)
        if not same:
            wrong.append(f"{measure.name} {got!r} (truth {truth!r})")
    return wrong


@dataclass
class AggregateTruth(Truth):
    """truth.Truth for the aggregate store (see the module doc): `model` is each produced
    record's, by its coordinates."""

    model: dict[tuple[int, int], Modelled] = field(default_factory=dict)

    def reason(self, record: Record, write_ts: int, max_future_ms: int) -> str | None:
        """Why a batch of `write_ts` under `max_future_ms` does not count `record` (None: it does):
        no value, else its modelled reason, else too far ahead."""
        if record.value is None:
            return deadletters.NULL_VALUE
        return self.model[record.coordinates].reason or uncountable_reason(record, write_ts, max_future_ms)

    def _recorded(self, position, rule: int) -> None:
        """Truth._recorded, each record's fate by its model."""
        batch = (position.batch_id, position.write_ts)
        if batch not in self.history:
            self.history.append(batch)
        for record in self.topic.read(self.topic.of(position.start), self.topic.of(position.end)):
            if record.coordinates not in self.fate:
                self.fate[record.coordinates] = self.reason(record, position.write_ts, rule)
                self.decided_by[record.coordinates] = self.history.index(batch)

    def _key(self, record: Record) -> bytes:
        return self.model[record.coordinates].key.encode()

    def _counted(
        self, state: dict[bytes, list[Record]], records: list[Record], retention_ms: int | None, stream_time: int | None
    ) -> int | None:
        """A batch's counted records added to each key's (those since it last counted from
        zero) by the retention rule: a key dated before the batch's cutoff counts from zero.
        Returns the stream time after the batch."""
        cutoff = cutoff_ms(retention_ms, stream_time)
        by_key: dict[bytes, list[Record]] = {}
        for record in records:
            by_key.setdefault(self._key(record), []).append(record)
        for key, group in by_key.items():
            before = state.get(key, [])
            if expired(max((r.time_ms for r in before), default=None), cutoff):
                before = []
            state[key] = before + group
        return max((t for t in (stream_time, *(r.time_ms for r in records)) if t is not None), default=None)

    def violations(self, cassandra: FakeCassandra) -> Violations:
        self._learn(cassandra)
        progress = cassandra.progress()
        covered = self.topic.of(KafkaOffsets.parse_stored(progress.offsets))
        problems: list[str] = []
        letters: set[DeadLetterKey] = set()
        by_batch: dict[int, list[Record]] = {}
        for record in self.topic.records():
            if record.offset >= covered.get(record.partition, 0):
                continue
            if record.coordinates not in self.fate:
                problems.append(f"record {_shown(record)} is below the store's offsets, but no recorded batch read it")
                continue
            reason = self.fate[record.coordinates]
            if reason is not None:
                letters.add(DeadLetterKey(record.partition, record.offset, reason))
            else:
                by_batch.setdefault(self.decided_by[record.coordinates], []).append(record)
        state: dict[bytes, list[Record]] = {}
        stream_time = None
        for index, batch in enumerate(self.history):
            stream_time = self._counted(state, by_batch.get(index, []), self.retention_of.get(batch), stream_time)

        unfinished = progress.unfinished_batch
        rule = None if unfinished is None else self.rule_of.get((unfinished, progress.pending_ts))
        pending: list[Record] = []
        pending_letters: set[DeadLetterKey] = set()
        with_pending = dict(state)
        if rule is not None:
            end = self.topic.of(KafkaOffsets.parse_stored(progress.pending_offsets))
            for record in self.topic.read(covered, end):
                reason = self.reason(record, progress.pending_ts, rule)
                if reason is not None:
                    pending_letters.add(DeadLetterKey(record.partition, record.offset, reason))
                else:
                    pending.append(record)
            retention = self.retention_of.get((unfinished, progress.pending_ts))
            self._counted(with_pending, pending, retention, stream_time)

        now = None if progress.max_event_time is None else millis_of(progress.max_event_time)
        cutoff = cutoff_ms(progress.retention_ms, now)  # what reads leave out now
        for key in sorted(set(cassandra.rows) | set(state)):
            row = cassandra.rows.get(key)
            want = state.get(key, [])
            if row is not None and unfinished is not None and row.entry.batch_id == unfinished:
                want = with_pending.get(key, [])
            want_time = max((r.time_ms for r in want), default=None)
            if expired(want_time, cutoff):
                want, want_time = [], None
            if row is not None and expired(row.entry.time_ms, cutoff):
                row = None
            problem = self._key_problem(row.entry if row is not None else None, want, want_time)
            if problem:
                tag = "absent" if row is None else f"tagged batch {row.entry.batch_id}, time {row.entry.time_ms}"
                counted = ", ".join(_shown(r) for r in want) or "none"
                problems.append(f"key {key.decode()!r} ({tag}): {problem}; its records counted: {counted}")

        stored_letters = set(cassandra.dead_letters)
        missing = [
            f"dead letter {_letter(letter)} missing: the record is modelled bad, or its batch's rule refuses it"
            for letter in sorted(letters - stored_letters, key=_letter_order)
        ]
        unexpected = [
            f"dead letter {_letter(letter)} unexpected (written by batch {cassandra.dead_letters[letter]})"
            for letter in sorted(stored_letters - letters - pending_letters, key=_letter_order)
        ]
        return Violations(f"registry: {cassandra.describe_progress()}", problems, missing, unexpected)

    def _key_problem(self, entry: Entry | None, want: list[Record], want_time: int | None) -> str | None:
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
        if entry.time_ms != want_time:
            wrong.append(f"time {entry.time_ms} (truth {want_time})")
        return "; ".join(wrong) or None


def _shown(record: Record) -> str:
    return f"p{record.partition}@{record.offset} {record.value!r}"


def _letter(letter: DeadLetterKey) -> str:
    return f"p{letter.partition}@{letter.offset} ({letter.reason})"


def _letter_order(letter: DeadLetterKey) -> tuple[int, int, str]:
    return letter.partition, letter.offset, letter.reason


# --- the machine ---


class AggregateProtocolMachine(BatchProtocolMachine):
    """BatchProtocolMachine over an aggregate store: JSON records, task attempts."""

    job_class: ClassVar[type[StreamJob]] = AggregateStreamJob

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[tuple[int, int], Modelled] = {}
        self.world.aggregate_attempts = []
        self.truth = AggregateTruth(self.world.topic, model=self.model)

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
        """`after_ms` later by the clock, a JSON record on the topic (bad as `fault` says;
        `null`: a message without a value), at `ahead_ms` ahead of the clock."""
        produce_json(self, partition, (key, qty, amount, pos, user, fault), null, ahead_ms, after_ms)

    @precondition(lambda self: self.job is not None)
    @rule(crash_at=STEP_INDEX, backup_at=STEP_INDEX, order=st.integers(0, 3), tasks=TASKS, seed=st.integers(0, 7),
          deaths=st.lists(LANDINGS, max_size=2), speculative=SPECULATIVE)  # fmt: skip
    def trigger(
        self,
        crash_at: int | None,
        backup_at: int | None,
        order: int,
        tasks: int,
        seed: int,
        deaths: list[int],
        speculative: tuple[bool, int] | None,
    ) -> None:
        """The query's next micro-batch (as BatchProtocolMachine.trigger), applied by `tasks`
        tasks; one task's first attempts die after `deaths` landings each, and `speculative`
        (starts late, stops after n landings) runs an attempt of it that goes on after its
        successor."""
        self.job.faults = TaskFaults(tasks, seed, tuple(deaths), speculative)
        self._run(self.job.trigger(order), crash_at, backup_at)

    @precondition(lambda self: self.job is not None)
    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3), qty=st.sampled_from(QTYS),
          amount=st.sampled_from(AMOUNTS), user=st.sampled_from(USERS), tasks=TASKS)  # fmt: skip
    def steady_batch(self, keys: list[Any], qty: int, amount: float, user: Any, tasks: int) -> None:
        """A second later a good record of each of `keys` (positions in order), and the batch
        that reads them, nothing failing: keys merged with what they hold, batch after batch."""
        self.steady_records(keys, qty, amount, user)
        self.job.faults = TaskFaults(tasks)
        self._run(self.job.trigger(0), None)

    def steady_records(self, keys: list[Any], qty: int, amount: float, user: Any) -> None:
        """steady_batch's records: a second later a good record of each of `keys`, positions in order."""
        for number, key in enumerate(keys):
            pos = POSITIONS[number % len(POSITIONS)]
            self.produce(0, key, qty, amount, pos, user, None, False, 0, 1_000 if number == 0 else 0)

    @precondition(lambda self: self.world.aggregate_attempts)
    @rule(which=st.integers(0, 3))
    def old_attempt_goes_on(self, which: int) -> None:
        """A speculative attempt still running after its successor takes its next step."""
        attempts = self.world.aggregate_attempts
        old = attempts[which % len(attempts)]
        self.steps = [old.step()]
        if old.done:
            attempts.remove(old)
