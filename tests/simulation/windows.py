"""The window store kind in the simulator: the stream's driver (driver.StreamJob) applying each
batch to a partitioned window store through the real apply of statestore.stream.apply_windows
(apply_window_deltas: the windows read, the replay-safe plan, the rows written) over a fake
window table (WindowTable, the apply's WindowRows), with a windowing the machine chooses first:
tumbling or hopping windows, with or without grace, a retention of a day or exactly window +
grace (a window expires the moment it closes). A hopping store mostly keeps its windows as panes
(WindowSpec.panes, issue 48): its batches then go through statestore.stream.apply_panes
(apply_pane_deltas: a row per key, pane and first open window) over a fake paned table
(PaneTable, the apply's PaneRows), whose windows, composed of its rows (compose_windows), are
what the truth checks; otherwise a row per window, as a store registered before panes keeps.

A batch's windows and late records are decided as statestore.stream.windowed decides them
(restated over values: WindowSpec.starts_of and WindowSpec.closed at the stream time the batch
began with, position.stream_time_ms; a paned store's rows: the record's pane and the first of its
open windows, as pane_deltas). The apply is one Spark task: its rows are written after it
read and planned, landing one at a time in any order; its attempts may die after any landing (a
new attempt of the task then runs), and a speculative attempt may land the rest of its rows after
its successor, or read and plan only then, even once later batches ran.

The truth of a window store, from the topic's records alone: a record's fate is decided by the
first recorded batch whose range holds it, at the stream time before that batch (the largest
event time of the records counted by the batches recorded before it: the truth keeps its own).
A record with no value, or too far ahead, is a dead letter as for key-value stores; a record
with words counts in each window holding its time that is still open (its end + grace not
before the stream time, its start after the stream time - retention), and is a dead letter
`late` if any of its windows had closed. Each (key, window) holds the count of its counted
words and their latest time. The allowance for the store's unfinished batch: a window row
tagged with it holds the truth plus that batch's delta (a paned store's window: plus that batch's
records of the panes whose rows it wrote), and its dead letters may be there.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import PaneEntry, StoreSpec, StoreType, WindowedEntry
from statestore.core.windows import WindowSpec, compose_windows
from statestore.store.book import deadletters
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.stream.apply import ApplyStats
from statestore.stream.apply_panes import PaneKey, apply_pane_deltas, pane_cache_key
from statestore.stream.apply_windows import WindowKey, apply_window_deltas, keyed
from statestore.stream.plan import Delta
from statestore.stream.tokenize import tokenize
from statestore.stream.transforms import future_limit_ms
from tests.simulation.driver import Step, StreamJob, dead_letter_reason
from tests.simulation.fake_cassandra import DeadLetterKey, FakeCassandra, newer_cell
from tests.simulation.fake_kafka import Record
from tests.simulation.machine import MAX_PARTITIONS, STEP_INDEX, WORDS, BatchProtocolMachine
from tests.simulation.truth import Truth, Violations, uncountable_reason

# The windowings a run chooses among (size, hop, grace, retention; None: a day).
WINDOWINGS = (
    (60_000, 60_000, 0, None),  # tumbling, no grace
    (60_000, 60_000, 30_000, 90_000),  # tumbling, retention exactly window + grace
    (60_000, 20_000, 30_000, None),  # hopping
    (60_000, 30_000, 0, 60_000),  # hopping, retention exactly the window
)
# The window kind's own: those, and a hop that does not divide the window (panes of 20 s, 3 a window).
KIND_WINDOWINGS = (*WINDOWINGS, (60_000, 40_000, 10_000, None))
LANDINGS = st.integers(0, 3)  # an attempt stops after this many of its rows landed
# Record times on the scale of the windows: some behind the clock, some ahead, windows closing.
AHEAD_MS = (0, 0, -30_000, -90_000, -200_000, 20_000, 45_000, 120_000, 900_000)
AFTER_MS = (0, 1_000, 20_000, 50_000, 100_000, 1_000_000)


def spec_of(windowing: tuple[int, int, int, int | None], panes: bool = False) -> StoreSpec:
    """A window store of `windowing`, its hopping windows kept as panes if `panes`."""
    size, hop, grace, retention = windowing
    window = WindowSpec(size, hop, grace, retention, segment_ms=60_000, panes=panes)
    return StoreSpec("ks", "windows", StoreType.PARTITIONED_WINDOW, 2, windowing=window)


@dataclass(frozen=True)
class TaskFaults:
    """What befalls the batch's task: its first attempts die after `deaths[i]` landings each
    (the last attempt then completes); `speculative`: (starts late, stops after n landings), an
    attempt that lands n rows and the rest later (`starts late`: it reads and plans only
    then, after its successor), or None."""

    deaths: tuple[int, ...] = ()
    speculative: tuple[bool, int] | None = None


@dataclass(frozen=True)
class StoredWindow:
    entry: WindowedEntry
    write_ts: int


class WindowTable:
    """The window store's table as the apply sees it (apply_windows.WindowRows): rows keyed by
    (key, window start), each written `USING TIMESTAMP` of its batch (a later write wins; two
    writes at one timestamp reconcile cell by cell as Cassandra's do, fake_cassandra.newer_cell:
    an attempt that writes a window again at its batch's timestamp with another value is seen);
    a read sees what has landed."""

    def __init__(self, spec: StoreSpec) -> None:
        self.spec = spec
        self.rows: dict[WindowKey, StoredWindow] = {}

    def read(self, session, windows: list[WindowKey], concurrency: int) -> dict[WindowKey, WindowedEntry]:
        return {window: self.rows[window].entry for window in windows if window in self.rows}

    def land(self, entry: WindowedEntry, write_ts: int) -> None:
        window = (entry.key, entry.start_ms)
        held = self.rows.get(window)
        if held is not None and held.write_ts == write_ts:
            cells = (newer_cell(a, b) for a, b in zip(held.entry[2:], entry[2:], strict=True))
            entry = WindowedEntry(entry.key, entry.start_ms, *cells)
        if held is None or held.write_ts <= write_ts:
            self.rows[window] = StoredWindow(entry, write_ts)

    def pending_held(self, window: WindowKey, row: StoredWindow, records: list[Record], batch: int) -> list[Record]:
        """Of the unfinished `batch`'s `records` in `window`, those its stored `row` holds: all of
        them once the batch wrote the row (it wrote the batch's whole delta), else none."""
        return records if row.entry.batch_id == batch else []


@dataclass(frozen=True)
class StoredPane:
    entry: PaneEntry
    write_ts: int


def _merged(parts: list[StoredPane]) -> tuple[int, int | None, int | None, int]:
    """A window's (count, batch, time, write timestamp) from the stored pane rows it is made of:
    the sum, and the latest of each of the others."""
    batches = [p.entry.batch_id for p in parts if p.entry.batch_id is not None]
    times = [p.entry.time_ms for p in parts if p.entry.time_ms is not None]
    total = sum(decode_long(p.entry.value) for p in parts)
    return total, max(batches, default=None), max(times, default=None), max(p.write_ts for p in parts)


class PaneTable:
    """A paned window store's table as the pane apply sees it (apply_panes.PaneRows): rows keyed
    by (key, pane, from), each written `USING TIMESTAMP` of its batch (a later write wins; two
    writes at one timestamp reconcile cell by cell, fake_cassandra.newer_cell, as WindowTable's);
    a read sees what has landed. `rows`: the windows its readers return, each composed of the pane
    rows it is made of (compose_windows: the sum, the latest batch and time)."""

    def __init__(self, spec: StoreSpec) -> None:
        self.spec = spec
        self.panes: dict[PaneKey, StoredPane] = {}

    def read_panes(self, session, rows: list[PaneKey], concurrency: int) -> dict[PaneKey, PaneEntry]:
        return {row: self.panes[row].entry for row in rows if row in self.panes}

    def land(self, entry: PaneEntry, write_ts: int) -> None:
        row = (entry.key, entry.pane_ms, entry.from_ms)
        held = self.panes.get(row)
        if held is not None and held.write_ts == write_ts:
            cells = (newer_cell(a, b) for a, b in zip(held.entry[3:], entry[3:], strict=True))
            entry = PaneEntry(*row, *cells)
        if held is None or held.write_ts <= write_ts:
            self.panes[row] = StoredPane(entry, write_ts)

    @property
    def rows(self) -> dict[WindowKey, StoredWindow]:
        """The stored windows, composed of the pane rows: (key, start) -> the window, its timestamp
        the latest of its rows'."""
        by_key: dict[bytes, list] = defaultdict(list)
        for (key, pane, from_ms), stored in sorted(self.panes.items()):
            by_key[key].append((pane, from_ms, stored))
        windows = {}
        for key, parts in by_key.items():
            for start, (count, batch, time_ms, write_ts) in compose_windows(self.spec.windowing, parts, _merged):
                entry = WindowedEntry(key, start, encode_long(count), batch, time_ms)
                windows[(key, start)] = StoredWindow(entry, write_ts)
        return windows

    def pending_held(self, window: WindowKey, row: StoredWindow, records: list[Record], batch: int) -> list[Record]:
        """Of the unfinished `batch`'s `records` in `window`, those its stored pane rows hold: the
        records of the panes where the batch wrote the key's row (one row a pane: its records'
        `from` is the pane's first open window at the batch's stream time)."""
        key, windowing = window[0], self.spec.windowing
        written = {pane for (k, pane, _), held in self.panes.items() if k == key and held.entry.batch_id == batch}
        return [record for record in records if windowing.pane_of(record.time_ms) in written]


class AttemptTable:
    """One task attempt's I/O: reads what has landed; its writes wait in `pending`, to land one
    at a time in an order `seed` fixes (the apply's UNLOGGED batches, one per Cassandra
    partition, go out concurrently; a row at a time is finer still)."""

    def __init__(self, table: WindowTable, seed: int) -> None:
        self.table = table
        self.rng = random.Random(seed)
        self.pending: list[Callable[[], None]] = []

    def read(self, session, windows: list[WindowKey], concurrency: int) -> dict[WindowKey, WindowedEntry]:
        return self.table.read(session, windows, concurrency)

    def write(self, session, entries: list[WindowedEntry], concurrency: int, write_ts: int | None) -> None:
        landings = [lambda entry=entry: self.table.land(entry, write_ts) for entry in entries]
        self.rng.shuffle(landings)
        self.pending.extend(landings)

    def read_panes(self, session, rows: list[PaneKey], concurrency: int) -> dict[PaneKey, PaneEntry]:
        return self.table.read_panes(session, rows, concurrency)

    def write_panes(self, session, entries: list[PaneEntry], concurrency: int, write_ts: int | None) -> None:
        self.write(session, entries, concurrency, write_ts)

    def land(self, count: int | None = None) -> int:
        """Land `count` of the pending rows (None: all); how many landed."""
        landed = 0
        while self.pending and (count is None or landed < count):
            self.pending.pop(0)()
            landed += 1
        return landed


@dataclass
class OldAttempt:
    """An attempt still running after its successor: its read and plan, if not yet made, then
    its remaining landings, one per event."""

    what: str
    start: Callable[[], AttemptTable] | None
    rows: AttemptTable | None = None

    def step(self) -> str:
        if self.start is not None:
            self.rows, self.start = self.start(), None
            return f"{self.what}: read and planned, {len(self.rows.pending)} row(s) to land"
        self.rows.land(1)
        return f"{self.what}: one more row landed, {len(self.rows.pending)} to go"

    @property
    def done(self) -> bool:
        return self.start is None and not self.rows.pending


@dataclass
class WindowWorld:
    """The window store's spec and table, and the old attempts still running."""

    spec: StoreSpec
    table: WindowTable | PaneTable
    old_attempts: list[OldAttempt] = field(default_factory=list)


def record_windows(record: Record, limit_ms: int | None, windowing: WindowSpec, stream_time: int | None):
    """windowed._windowed_records and _late for one record: (dead-letter reason or None, its
    words, the open windows it counts in). A record with words and a closed window is late,
    and still counts in its open ones."""
    reason = dead_letter_reason(record, limit_ms)
    words = [] if reason else [w for w in tokenize(record.value or "") if w]
    starts = windowing.starts_of(record.time_ms)
    opened = [s for s in starts if not windowing.closed(s, stream_time)]
    if reason is None and words and len(opened) < len(starts):
        reason = deadletters.LATE
    return reason, words, opened


def window_batch(
    records: list[Record], limit_ms: int | None, windowing: WindowSpec, stream_time: int | None
) -> tuple[list[tuple[int, Delta]], list[DeadLetterKey]]:
    """windowed.windowed_deltas and the dead letters (transforms.dead_letter_rows,
    windowed.late_letter_rows): (window start, delta) per word and open window, in order, and
    the records that cannot be counted (no value, too far ahead) or are late."""
    counts: dict[tuple[int, str], list[int]] = {}
    letters = []
    for record in records:
        reason, words, opened = record_windows(record, limit_ms, windowing, stream_time)
        if reason is not None:
            letters.append(DeadLetterKey(record.partition, record.offset, reason))
        for word in words:
            for start in opened:
                count = counts.setdefault((start, word), [0, record.time_ms])
                count[0] += 1
                count[1] = max(count[1], record.time_ms)
    deltas = [(start, Delta(word.encode(), n, last)) for (start, word), (n, last) in sorted(counts.items())]
    return deltas, letters


def pane_batch(
    records: list[Record], limit_ms: int | None, windowing: WindowSpec, stream_time: int | None
) -> tuple[list[Delta], list[DeadLetterKey]]:
    """windowed.pane_deltas and the dead letters: a delta per word, pane of its record's time and
    first of its record's open windows (none when all closed), keyed by pane_cache_key, in order,
    and the dead letters as window_batch's."""
    counts: dict[tuple[int, int, str], list[int]] = {}
    letters = []
    for record in records:
        reason, words, opened = record_windows(record, limit_ms, windowing, stream_time)
        if reason is not None:
            letters.append(DeadLetterKey(record.partition, record.offset, reason))
        if not opened:
            continue
        pane = windowing.pane_of(record.time_ms)
        for word in words:
            count = counts.setdefault((opened[0], pane, word), [0, record.time_ms])
            count[0] += 1
            count[1] = max(count[1], record.time_ms)
    deltas = [
        Delta(pane_cache_key(word.encode(), pane, from_ms), n, last)
        for (from_ms, pane, word), (n, last) in sorted(counts.items())
    ]
    return deltas, letters


class WindowStreamJob(StreamJob):
    """driver.StreamJob whose batches apply to the window store (see the module doc). The
    machine sets `faults` before each trigger."""

    faults: TaskFaults = TaskFaults()

    @property
    def windows(self) -> WindowWorld:
        return self.world.windows

    def apply_batch(self, records: list[Record], position: BatchPosition, write_order: int) -> Iterator[Step]:
        """batch_apply._apply_batch for a window store: begun, the apply (one task,
        window_applier: apply_window_deltas; with the apply cache on, windows after the stream
        time are not read: here on odd `write_order`s), the dead letters, recorded with the
        apply's latest event time."""
        max_future = position.max_future_ms
        batch_id, write_ts = position.batch_id, position.write_ts
        limit = future_limit_ms(write_ts, max_future)
        self.cassandra.begin_batch(position, self.epoch)
        yield Step("begin", f"batch {batch_id} begun (write_ts {write_ts}, limit {limit})", position, max_future)

        deltas, letters = self.batch_of(records, limit, position)
        table = self.windows.table

        def attempt(seed: int) -> tuple[AttemptTable, ApplyStats]:
            rows = AttemptTable(table, seed)
            return rows, self.apply_to(rows, deltas, position, write_order)

        faults = self.faults
        if faults.speculative is not None and deltas:
            late, stop = faults.speculative

            def start() -> AttemptTable:
                rows, _ = attempt(write_order * 31)
                rows.land(stop)
                return rows

            old = OldAttempt(f"batch {batch_id}'s speculative attempt", start)
            if not late:
                old.step()
            if not old.done:
                self.windows.old_attempts.append(old)
        stats = ApplyStats()
        for number, dies_after in enumerate((*faults.deaths, None), 1):
            rows, stats = attempt(write_order * 31 + number)
            if dies_after is not None:
                landed = rows.land(dies_after)
                what = f"batch {batch_id}: task attempt {number} died after {landed} row(s)"
                yield Step("write", what, position, max_future)
                continue
            total = len(rows.pending)
            for landed in range(1, total + 1):
                rows.land(1)
                what = f"batch {batch_id}: task attempt {number} landed row {landed} of {total}"
                yield Step("write", what, position, max_future)
            break

        if letters:
            for letter in letters:
                self.cassandra.write_dead_letter(letter, batch_id, position.write_ts)
            yield Step("dead letters", f"batch {batch_id}: {len(letters)} dead letter(s) written", position, max_future)
        self.cassandra.record_batch(position, stats.max_time_ms, self.epoch)  # recording.done
        yield Step("record", f"batch {batch_id} recorded, ending at {position.end.as_json()}", position, max_future)

    def batch_of(self, records: list[Record], limit_ms: int | None, position: BatchPosition) -> tuple[list, list]:
        """The batch's deltas as the apply takes them, and its dead letters (window_batch; a paned
        store's: pane_batch)."""
        windowing = self.windows.spec.windowing
        of = pane_batch if windowing.panes else window_batch
        return of(records, limit_ms, windowing, position.stream_time_ms)

    def apply_to(self, rows: AttemptTable, deltas: list, position: BatchPosition, write_order: int) -> ApplyStats:
        """One attempt's apply of the batch's deltas through `rows` (apply_window_deltas; a
        paned store's: apply_pane_deltas)."""
        after = position.stream_time_ms if write_order % 2 else None
        spec = self.windows.spec
        if spec.windowing.panes:
            batch_id, write_ts = position.batch_id, position.write_ts
            return apply_pane_deltas(None, spec, batch_id, deltas, 1, write_ts, stream_time_ms=after, table=rows)
        keys = keyed(deltas)
        return apply_window_deltas(
            None, spec, position.batch_id, keys, 1, position.write_ts, stream_time_ms=after, table=rows
        )


# --- the truth ---


def window_fate(
    record: Record, write_ts: int, max_future_ms: int, stream_time: int | None, windowing: WindowSpec
) -> tuple[str | None, tuple[int, ...]]:
    """(why a window store's batch of `write_ts` under `max_future_ms` that began at
    `stream_time` does not count all of `record` (None: it counts it whole), the windows it
    counts it in). Stated apart from the store's rule: a window is closed once its end + grace
    is before the stream time, or its start is at or before the stream time - retention."""
    reason = uncountable_reason(record, write_ts, max_future_ms)
    if reason is not None or not tokenize(record.value):
        return reason, ()
    return windows_fate(record.time_ms, stream_time, windowing)


def windows_fate(time_ms: int, stream_time: int | None, windowing: WindowSpec) -> tuple[str | None, tuple[int, ...]]:
    """window_fate of a record counted at `time_ms`: (LATE when one of its windows had closed, else
    None; the windows it counts in), stated apart from the store's rule (window_fate)."""
    size, hop, grace, retention = windowing.size_ms, windowing.hop_ms, windowing.grace_ms, windowing.retention_ms
    last = time_ms - time_ms % hop
    starts = [s for s in range(last, last - size, -hop) if s >= 0 and s <= time_ms < s + size][::-1]
    if stream_time is None:
        return None, tuple(starts)
    opened = tuple(s for s in starts if s + size + grace >= stream_time and s > stream_time - retention)
    return (deadletters.LATE if len(opened) < len(starts) else None), opened


@dataclass
class WindowTruth(Truth):
    """truth.Truth for the window store (see the module doc)."""

    windowing: WindowSpec | None = None
    table: WindowTable | PaneTable | None = None
    stream_time: int | None = None  # the largest event time the recorded batches counted
    fates: dict[tuple[int, int], tuple[str | None, tuple[int, ...]]] = field(default_factory=dict)

    def record_fate(self, record: Record, write_ts: int, rule: int, stream_time: int | None):
        """(why the batch does not count all of `record` or None, the windows it counts in)."""
        return window_fate(record, write_ts, rule, stream_time, self.windowing)

    def observe(self, step: Step) -> None:
        if step.kind not in ("write", "dead letters", "record"):
            return
        position = step.position
        rule = self.rule_of.setdefault((position.batch_id, position.write_ts), step.max_future_ms)
        if step.kind != "record":
            return
        latest = self.stream_time
        for record in self.topic.read(self.topic.of(position.start), self.topic.of(position.end)):
            if record.coordinates in self.fates:
                continue
            fate = self.record_fate(record, position.write_ts, rule, self.stream_time)
            self.fates[record.coordinates] = fate
            self.fate[record.coordinates] = fate[0]
            if fate[1]:
                latest = record.time_ms if latest is None else max(latest, record.time_ms)
        self.stream_time = latest

    def violations(self, cassandra: FakeCassandra) -> Violations:
        progress = cassandra.progress()
        covered = self.topic.of(KafkaOffsets.parse_stored(progress.offsets))
        problems: list[str] = []
        truth: dict[WindowKey, list[Record]] = defaultdict(list)
        letters: set[DeadLetterKey] = set()
        for record in self.topic.records():
            if record.offset >= covered.get(record.partition, 0):
                continue
            if record.coordinates not in self.fates:
                problems.append(f"record p{record.partition}@{record.offset} is below the store's offsets, unread")
                continue
            self.tally(record, self.fates[record.coordinates], truth, letters)

        unfinished = progress.unfinished_batch
        rule = None if unfinished is None else self.rule_of.get((unfinished, progress.pending_ts))
        pending: dict[WindowKey, list[Record]] = defaultdict(list)
        pending_letters: set[DeadLetterKey] = set()
        if rule is not None:
            end = self.topic.of(KafkaOffsets.parse_stored(progress.pending_offsets))
            for record in self.topic.read(covered, end):
                fate = self.record_fate(record, progress.pending_ts, rule, self.stream_time)
                self.tally(record, fate, pending, pending_letters)

        stored = self.table.rows
        for window in sorted(set(stored) | set(truth)):
            row = stored.get(window)
            want = list(truth.get(window, ()))
            if row is not None and unfinished is not None:
                want += self.table.pending_held(window, row, pending.get(window, []), unfinished)
            problem = self.window_problem(None if row is None else row.entry, want)
            if problem:
                tag = "absent" if row is None else f"tagged batch {row.entry.batch_id}, time {row.entry.time_ms}"
                problems.append(f"key {window[0].decode()!r} window {window[1]} ({tag}): {problem}")
        held = set(cassandra.dead_letters)
        missing = [f"dead letter {_shown(letter)} missing" for letter in sorted(letters - held, key=_order)]
        unexpected = []
        for letter in sorted(held - letters - pending_letters, key=_order):
            fate = self.fates.get((letter.partition, letter.offset))
            said = "no recorded batch read it" if fate is None else f"its first recorded batch decided {fate}"
            unexpected.append(
                f"dead letter {_shown(letter)} unexpected (written by batch {cassandra.dead_letters[letter]}): {said}"
            )
        registry = f"registry: {cassandra.describe_progress()}; the truth's stream time {self.stream_time}"
        return Violations(registry, problems, missing, unexpected)

    def tally(self, record: Record, fate: tuple[str | None, tuple[int, ...]], windows: dict, letters: set) -> None:
        """`record` under its `fate`: its dead letter, and the record in each window it counts in
        (once per word of it)."""
        reason, opened = fate
        if reason is not None:
            letters.add(DeadLetterKey(record.partition, record.offset, reason))
        for key in self.keys_of(record) if opened else ():
            for start in opened:
                windows[(key, start)].append(record)

    def keys_of(self, record: Record) -> list[bytes]:
        """The keys a counted record counts under: its words, once per occurrence."""
        return [word.encode() for word in tokenize(record.value)]

    def window_problem(self, entry: WindowedEntry | None, want: list[Record]) -> str | None:
        """How a window's row differs from the records counted in it (None: it does not)."""
        have = (0, None) if entry is None else (decode_long(entry.value), entry.time_ms)
        truth = (len(want), max((r.time_ms for r in want), default=None))
        return None if have == truth else f"stored {have[0]} (time {have[1]}), truth {truth[0]} (time {truth[1]})"


def _shown(letter: DeadLetterKey) -> str:
    return f"p{letter.partition}@{letter.offset} ({letter.reason})"


def _order(letter: DeadLetterKey) -> tuple[int, int, str]:
    return letter.partition, letter.offset, letter.reason


# --- the machine ---


class WindowProtocolMachine(BatchProtocolMachine):
    """BatchProtocolMachine over a window store, with task attempts (see the module doc)."""

    job_class: ClassVar[type[StreamJob]] = WindowStreamJob

    def __init__(self) -> None:
        super().__init__()
        self.choose_windowing(0)

    @initialize(which=st.integers(0, len(KIND_WINDOWINGS) - 1), panes=st.sampled_from((True, True, False)))
    def choose_windowing(self, which: int, panes: bool = True) -> None:
        """The store's windowing, fixed when it was created (KIND_WINDOWINGS), hopping windows kept
        as panes if `panes` (a new store's choice; a store registered before panes keeps a row per window)."""
        spec = spec_of(KIND_WINDOWINGS[which], panes)
        self.windows = WindowWorld(spec, PaneTable(spec) if spec.windowing.panes else WindowTable(spec))
        self.world.windows = self.windows
        self.truth = WindowTruth(self.world.topic, windowing=spec.windowing, table=self.windows.table)

    @rule(partition=st.integers(0, MAX_PARTITIONS - 1), words=st.lists(st.sampled_from(WORDS), max_size=3),
          null=st.sampled_from((False, False, False, True)), ahead_ms=st.sampled_from(AHEAD_MS),
          after_ms=st.sampled_from(AFTER_MS))  # fmt: skip
    def produce(self, partition: int, words: list[str], null: bool, ahead_ms: int, after_ms: int) -> None:
        """BatchProtocolMachine.produce, at times on the scale of the windows (some behind the
        clock), fewer of them without a value."""
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

    @precondition(lambda self: self.windows.old_attempts)
    @rule(which=st.integers(0, 3))
    def old_attempt_goes_on(self, which: int) -> None:
        """An attempt that still runs after its successor takes its next step."""
        attempts = self.windows.old_attempts
        old = attempts[which % len(attempts)]
        self.steps = [old.step()]
        if old.done:
            attempts.remove(old)
