"""Cassandra, as far as a session store's apply sees it: the store's table of sessions, LOGGED
batches and the batch log, and the executors' task attempts that write to it.

What matters of the real system and is kept:
- a row is (key, session end, session start) -> the session, written and deleted `USING
  TIMESTAMP` of its batch; a later timestamp wins, and at the same timestamp a delete wins
  over a write (a tombstone shadows the cells it ties with), and of two writes each cell keeps
  the larger value (its bytes compared unsigned, a null cell winning as a tombstone), as in
  Cassandra: an attempt that writes a row again at its batch's timestamp with another value
  than an earlier attempt's is seen (before, the first write was kept, and the store held the
  earlier attempt's value whatever the later one wrote);
- a change is written as the apply's own plan says (partitioned_session.write_plan, the real
  decision): a change within one Cassandra partition (store partition, segment) lands whole; a
  LOGGED batch across partitions is first kept in the batch log, then its partitions become
  visible one at a time, and if its attempt dies in between, the batch log applies the rest
  later (an event the scheduler chooses: `FakeSessionTable.replay`); sessions the plan deletes
  `after` go once everything else of the slice has landed;
- a read sees what has landed, not the batch log (a SERIAL read would not either);
- a task attempt (AttemptRows, the apply's statestore.stream.apply_sessions.SessionRows) may
  die after any landing (AttemptDied: Spark then runs a new attempt of the task), or stop
  there and go on later, after its successor (a speculative attempt, or one a lost executor
  never stopped): its remaining landings are the scheduler's to run (`pending`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from statestore.core.codecs import encode_long
from statestore.core.model import SessionEntry, StoreSpec
from statestore.core.partitioner import partition_for
from statestore.store.tables.partitioned_session import Home, SessionChange, write_plan

# A row's primary key within the store: (key, session end, session start).
RowKey = tuple[bytes, int, int]
# One row's mutation: a session written, or (None) the row deleted.
Mutation = tuple[RowKey, SessionEntry | None]


class AttemptDied(Exception):
    """The task attempt died (its executor lost, the task killed): Spark runs another attempt."""


def row_key(entry: SessionEntry) -> RowKey:
    return entry.key, entry.end_ms, entry.start_ms


@dataclass(frozen=True)
class Cell:
    """A row as Cassandra holds it: the session (None: a tombstone) and its write timestamp."""

    entry: SessionEntry | None
    write_ts: int


@dataclass
class LoggedBatch:
    """A LOGGED batch statement in the batch log: its mutations by Cassandra partition, and the
    partitions already applied."""

    number: int
    write_ts: int
    homes: dict[Home, list[Mutation]]
    landed: set[Home] = field(default_factory=set)

    def describe(self) -> str:
        return f"LOGGED batch #{self.number} ({len(self.landed)} of {len(self.homes)} partitions visible)"


@dataclass
class FakeSessionTable:
    """The session store's table and the batch log of its LOGGED batches (see the module doc)."""

    spec: StoreSpec
    cells: dict[RowKey, Cell] = field(default_factory=dict)
    batch_log: list[LoggedBatch] = field(default_factory=list)
    batches_logged: int = 0

    def home(self, key: bytes, end_ms: int) -> Home:
        """PartitionedSessionTable._home: (store partition of the key, segment of the session's end)."""
        return partition_for(key, self.spec.partitions), self.spec.windowing.segment_of(end_ms)

    def mutate(self, cells: dict[RowKey, Cell], mutation: Mutation, write_ts: int) -> None:
        """One row's write or delete at `write_ts`: lost to a later one, and a write to a delete
        of the same timestamp; two writes of the same timestamp reconcile cell by cell (tied)."""
        key, entry = mutation
        held = cells.get(key)
        if held is not None and (held.write_ts > write_ts or (held.write_ts == write_ts and held.entry is None)):
            return
        if held is not None and held.write_ts == write_ts and entry is not None:
            entry = tied(held.entry, entry)
        cells[key] = Cell(entry, write_ts)

    def land(self, mutations: list[Mutation], write_ts: int) -> None:
        for mutation in mutations:
            self.mutate(self.cells, mutation, write_ts)

    def log(self, homes: dict[Home, list[Mutation]], write_ts: int) -> LoggedBatch:
        """A LOGGED batch written to the batch log (nothing of it visible yet)."""
        self.batches_logged += 1
        batch = LoggedBatch(self.batches_logged, write_ts, homes)
        self.batch_log.append(batch)
        return batch

    def land_partition(self, batch: LoggedBatch, home: Home) -> None:
        """One partition of a LOGGED batch applied; the batch leaves the log once all are."""
        self.land(batch.homes[home], batch.write_ts)
        batch.landed.add(home)
        if batch.landed == set(batch.homes) and batch in self.batch_log:
            self.batch_log.remove(batch)

    def replay(self, index: int) -> LoggedBatch:
        """The batch log's replay of one batch: all of it applied (again), then removed."""
        batch = self.batch_log.pop(index)
        for mutations in batch.homes.values():
            self.land(mutations, batch.write_ts)
        batch.landed = set(batch.homes)
        return batch

    def find_many(self, asks: list[tuple[bytes, int, int]]) -> dict[bytes, list[SessionEntry]]:
        """PartitionedSessionTable.find_many over what has landed (not the batch log)."""
        found: dict[bytes, list[SessionEntry]] = {}
        for key, earliest_end, latest_start in asks:
            sessions = [
                cell.entry
                for (row, end, start), cell in sorted(self.cells.items())
                if row == key and cell.entry is not None and end >= earliest_end and start <= latest_start
            ]
            if sessions:
                found[key] = sessions
        return found

    def settled(self) -> dict[bytes, list[SessionEntry]]:
        """Every key's sessions once the batch log has applied every batch it holds: what the
        store will hold whatever happens next (the invariant is about it)."""
        cells = dict(self.cells)
        for batch in self.batch_log:
            for mutations in batch.homes.values():
                for mutation in mutations:
                    self.mutate(cells, mutation, batch.write_ts)
        sessions: dict[bytes, list[SessionEntry]] = {}
        for (key, _, _), cell in sorted(cells.items()):
            if cell.entry is not None:
                sessions.setdefault(key, []).append(cell.entry)
        return sessions


def tied(held: SessionEntry, written: SessionEntry) -> SessionEntry:
    """A row written twice at the same timestamp, as Cassandra reconciles it: each cell (value,
    time, batch_id) the larger of the two by its bytes, compared unsigned; a null cell (a
    tombstone) wins."""

    def larger(a: int | None, b: int | None) -> int | None:
        if a is None or b is None:
            return None
        return a if encode_long(a) >= encode_long(b) else b

    return replace(
        written,
        value=max(held.value, written.value),
        time_ms=larger(held.time_ms, written.time_ms),
        batch_id=larger(held.batch_id, written.batch_id),
    )


@dataclass
class Landing:
    """One step of an attempt's writes that makes something visible (or, `sends`, hands a
    LOGGED batch to its coordinator first)."""

    run: Callable[[], None]
    logged: dict[str, LoggedBatch] | None = None  # of a LOGGED batch: {"batch": it}, once sent
    sends: bool = False


class AttemptRows:
    """One task attempt's I/O (statestore.stream.apply_sessions.SessionRows) against the table:
    it reads what has landed, and writes as write_plan says, its concurrent units landing in an
    order `seed` fixes. After `stop_after` landings it dies (`pause` False: AttemptDied) or stops
    and keeps the rest for later (`pending`: units it has not sent yet; the rest of a LOGGED
    batch it sent is the batch log's)."""

    def __init__(self, table: FakeSessionTable, seed: int, stop_after: int | None, pause: bool = False) -> None:
        self.table = table
        self.rng = random.Random(seed)
        self.stop_after = stop_after
        self.pause = pause
        self.landed = 0
        self.pending: list[Landing] = []
        self.stopped = False

    def find_many(self, asks: list[tuple[bytes, int, int]]) -> dict[bytes, list[SessionEntry]]:
        return self.table.find_many(asks)

    def apply(self, changes: list[SessionChange], write_ts: int) -> None:
        table = self.table
        changes = [change for change in changes if change.deletes or change.writes]
        keys = [(change.writes or change.deletes)[0].key for change in changes]
        partitions = [partition_for(key, table.spec.partitions) for key in keys]
        plan = write_plan(changes, partitions, table.spec.windowing.segment_of)
        first: list[list[Landing]] = [
            [Landing(lambda change=change: table.land(_mutations(change), write_ts))] for _, change in plan.atomic
        ]
        first.extend(self._logged(change, write_ts) for change in plan.logged)
        self.rng.shuffle(first)
        after = [Landing(lambda entry=entry: table.land([(row_key(entry), None)], write_ts)) for _, entry in plan.after]
        self.rng.shuffle(after)
        self._run([landing for group in first for landing in group] + after)

    def _logged(self, change: SessionChange, write_ts: int) -> list[Landing]:
        """A LOGGED batch's landings: sent to the batch log with its first partition applied,
        then one partition after another."""
        homes: dict[Home, list[Mutation]] = {}
        for mutation in _mutations(change):
            (key, end, _), _entry = mutation
            homes.setdefault(self.table.home(key, end), []).append(mutation)
        order = sorted(homes)
        self.rng.shuffle(order)
        holder: dict[str, LoggedBatch] = {}

        def send() -> None:
            holder["batch"] = self.table.log(homes, write_ts)
            self.table.land_partition(holder["batch"], order[0])

        return [
            Landing(send, holder, sends=True),
            *(Landing(lambda h=h: self.table.land_partition(holder["batch"], h), holder) for h in order[1:]),
        ]

    def _run(self, landings: list[Landing]) -> None:
        for index, landing in enumerate(landings):
            if self.stopped or (self.stop_after is not None and self.landed >= self.stop_after):
                self.stopped = True
                if not self.pause:
                    raise AttemptDied(f"task attempt died after {self.landed} landing(s)")
                # The rest of a LOGGED batch already sent is the batch log's, not the attempt's.
                self.pending.extend(
                    each for each in landings[index:] if each.logged is None or "batch" not in each.logged
                )
                return
            landing.run()
            self.landed += 1


def _mutations(change: SessionChange) -> list[Mutation]:
    return [*((row_key(e), None) for e in change.deletes), *((row_key(e), e) for e in change.writes)]
