"""The partitioned session store's table: PRIMARY KEY ((partition, segment), key, session_end, session_start).

The segment is the session's end over the segment span (statestore.store.tables.segmented has the
layout the window and session tables share, and its rules). Rows sort by key, then end, then start:
Kafka Streams' `findSessions(key, earliestEnd, latestStart)` is one slice from `earliestEnd` on per
segment, the start bound checked on the rows read.

A merge replaces sessions with one. Within one Cassandra partition its deletes and its insert
are one UNLOGGED batch statement, which lands whole. Across partitions (a session that grew into
another segment) its sessions are written first and what they replace is deleted only once they
are acknowledged (write_plan), so a reader sees the merge not begun, or its session with some
of what it replaces still there: never the replaced sessions gone and the merged one missing,
which a LOGGED batch (applied one partition at a time, the rest from the batch log after a
coordinator failure) let a new task attempt see and merge again (issue 45 item 3). The stream's
apply completes a merge it finds half done (statestore.stream.apply_sessions). The rule: this
module owns every CQL statement of a session table but the shared segment ones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain

from cassandra.cluster import EXEC_PROFILE_DEFAULT
from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType

from statestore.conn.cassandra import prepare
from statestore.core.model import EVERYTHING, KeyRange, SessionEntry, StoreSpec
from statestore.core.options import TableOptions
from statestore.core.partitioner import partitions_for
from statestore.store.tables.base import BATCH_BYTES, chunked, range_condition, row_bytes, time_ms_of, write_batches
from statestore.store.tables.base import unset_if_none as _time
from statestore.store.tables.paging import merge_in_order, paged
from statestore.store.tables.segmented import SegmentedTable
from statestore.store.tables.splits import Split
from statestore.store.tables.unlogged import atomic_batches, write_unlogged

_COLUMNS = "key, session_start, session_end, value, batch_id, time"
_BATCH_ROWS = 64  # the most new sessions of one Cassandra partition in one UNLOGGED batch
# The largest row (key, value and the rest) that atomic_batches groups: _BATCH_ROWS of them,
# padding included, stay within BATCH_BYTES. Larger ones go to write_batches, or row by row.
_SMALL_ROW_BYTES = BATCH_BYTES // _BATCH_ROWS
_READ_KEYS = 100  # the most keys of one query's `key IN ?` (as the key-value tables)


def _entry(row) -> SessionEntry:
    return SessionEntry(row.key, row.session_start, row.session_end, row.value, row.batch_id, time_ms_of(row.time))


def _order(entry: SessionEntry) -> tuple[bytes, int, int]:
    return (entry.key, entry.end_ms, entry.start_ms)


def _row(home: tuple[int, int], e: SessionEntry) -> tuple:
    """The values of a session's INSERT (partition, segment, key, end, start, value, time, batch)."""
    return (*home, e.key, e.end_ms, e.start_ms, e.value, _time(e), e.batch_id)


def _small(e: SessionEntry) -> bool:
    """Whether a session's row is small enough for atomic_batches."""
    return row_bytes(e) <= _SMALL_ROW_BYTES


def _pair_batches(pairs: list[tuple[SessionEntry, SessionEntry]]) -> Iterator[list[tuple[SessionEntry, SessionEntry]]]:
    """(replaced, new) session pairs cut as write_batches cuts their new sessions, at half the
    rows (a pair is two statements)."""
    start = 0
    for rows in write_batches([new for _, new in pairs], _BATCH_ROWS // 2):
        yield pairs[start : start + len(rows)]
        start += len(rows)


@dataclass(frozen=True)
class SessionChange:
    """One key's change by one batch: sessions to delete (replaced by a merge) and to write."""

    deletes: tuple[SessionEntry, ...]
    writes: tuple[SessionEntry, ...]


Home = tuple[int, int]  # a row's Cassandra partition: (store partition, segment)


@dataclass(frozen=True)
class WritePlan:
    """How a slice's changes reach Cassandra (PartitionedSessionTable.apply; the protocol
    simulator's fake Cassandra follows it too): `atomic`, (home, change) pairs that each land
    whole, within one Cassandra partition (UNLOGGED batches of that partition); `logged`,
    changes that each are one LOGGED batch statement across partitions (Cassandra applies
    its partitions one at a time, and after a coordinator failure the rest from the batch
    log); `after`, (home, session) deletes sent only once everything else is acknowledged."""

    atomic: tuple[tuple[Home, SessionChange], ...]
    # None since issue 45 item 3; the protocol simulator's fake applies LOGGED batches as
    # Cassandra does, so a plan that brought them back would be checked there.
    logged: tuple[SessionChange, ...] = ()
    after: tuple[tuple[Home, SessionEntry], ...] = ()


def write_plan(changes: list[SessionChange], partitions: list[int], segment_of: Callable[[int], int]) -> WritePlan:
    """Pure: how `changes` (each one key's, whose store partition is `partitions[i]`) are
    written: a change within one Cassandra partition lands whole; of one across partitions,
    each session it writes lands whole, and what it deletes goes `after` (see the module doc).
    No LOGGED batch: one would be seen half applied."""
    atomic, after = [], []
    for change, partition in zip(changes, partitions, strict=True):
        homes = {(partition, segment_of(e.end_ms)) for e in (*change.deletes, *change.writes)}
        if len(homes) == 1:
            atomic.append((homes.pop(), change))
            continue
        atomic.extend(((partition, segment_of(e.end_ms)), SessionChange((), (e,))) for e in change.writes)
        after.extend(((partition, segment_of(e.end_ms)), e) for e in change.deletes)
    return WritePlan(tuple(atomic), (), tuple(after))


class PartitionedSessionTable(SegmentedTable):
    """A session store's table; it owns every CQL statement that touches it but the shared
    segment ones (SegmentedTable). No I/O here."""

    _SPLIT_COLUMNS = _COLUMNS
    _SPLIT_TIME = "session_end"
    _split_entry = staticmethod(_entry)

    def __init__(self, spec: StoreSpec, profile: object = EXEC_PROFILE_DEFAULT) -> None:
        if not spec.store_type.sessioned:
            raise ValueError(f"store {spec.name} is not a session store")
        super().__init__(spec, profile)

    def create_cql(self, options: TableOptions | None = None) -> str:
        options = options or self.default_options()
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            " partition int, segment bigint, key blob, session_end bigint, session_start bigint, value blob,"
            " time timestamp, batch_id bigint,"
            " PRIMARY KEY ((partition, segment), key, session_end, session_start))"
            f" WITH {options.cql(f'statestore partitioned-session store {self.spec.name}')}"
        )

    def apply(self, session, changes: list[SessionChange], concurrency: int, write_ts: int | None) -> None:
        """Write every change (idempotent: absolute values, deletes of fixed rows), at
        `write_ts` microseconds (None: the server's clock), each change whole: a change that
        only adds sessions of one Cassandra partition goes with others of that partition in
        prepared UNLOGGED batches (one new session: a row of its own; several: rows never cut
        apart, atomic_batches), and so does a change that replaces one session with one (a
        delete and an insert, never cut apart); other changes within one partition share
        UNLOGGED batch statements with others of that partition (a single-partition batch lands
        whole), never cut; a change across partitions writes each of its sessions as a change
        of its own and, once every write is acknowledged, deletes what they replace
        (write_plan)."""
        using = " USING TIMESTAMP ?" if write_ts is not None else ""
        stamp = () if write_ts is None else (write_ts,)
        insert = (
            f"INSERT INTO {self.qualified} (partition, segment, key, session_end, session_start, value, time,"
            " batch_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        upsert = prepare(session, f"{insert}{using}")
        delete = prepare(
            session,
            f"DELETE FROM {self.qualified}{using} WHERE partition = ? AND segment = ? AND key = ?"
            " AND session_end = ? AND session_start = ?",
        )

        def add(batch: BatchStatement, change: SessionChange) -> None:
            for e in change.deletes:
                batch.add(delete, (*stamp, *self._home(e.key, e.end_ms), e.key, e.end_ms, e.start_ms))
            for e in change.writes:
                home = self._home(e.key, e.end_ms)
                batch.add(upsert, (*home, e.key, e.end_ms, e.start_ms, e.value, _time(e), e.batch_id, *stamp))

        def new_batch(kind: BatchType) -> BatchStatement:
            batch = BatchStatement(batch_type=kind)
            batch.is_idempotent = True
            return batch

        work = []
        single_rows: dict[tuple[int, int], list[SessionEntry]] = defaultdict(list)
        # Small rows of one partition's changes that only add sessions: one session each (they
        # need not land together) and several (each change's rows must).
        small_singles: dict[tuple[int, int], list[tuple]] = defaultdict(list)
        small_atoms: dict[tuple[int, int], list[list[tuple]]] = defaultdict(list)
        moves: dict[tuple[int, int], list[tuple[SessionEntry, SessionEntry]]] = defaultdict(list)
        one_home: dict[tuple[int, int], list[SessionChange]] = defaultdict(list)
        changes = [change for change in changes if change.deletes or change.writes]
        # A change is one key's: its partition hashed once, all keys together (partitions_for).
        partitions = partitions_for([(c.writes or c.deletes)[0].key for c in changes], self.spec.partitions)
        plan = write_plan(changes, partitions, self.windowing.segment_of)
        for change in plan.logged:
            batch = new_batch(BatchType.LOGGED)
            add(batch, change)
            work.append((batch, ()))
        for home, change in plan.atomic:
            if not change.deletes and all(map(_small, change.writes)) and len(change.writes) <= _BATCH_ROWS:
                rows = [_row(home, e) for e in change.writes]
                if len(rows) == 1:
                    small_singles[home].extend(rows)
                else:
                    small_atoms[home].append(rows)
            elif not change.deletes and len(change.writes) == 1:
                single_rows[home].append(change.writes[0])
            elif len(change.deletes) == 1 and len(change.writes) == 1:
                moves[home].append((change.deletes[0], change.writes[0]))
            else:
                one_home[home].append(change)
        for group in one_home.values():
            batch, rows = new_batch(BatchType.UNLOGGED), 0
            for change in group:
                size = len(change.deletes) + len(change.writes)
                if rows and rows + size > _BATCH_ROWS:
                    work.append((batch, ()))
                    batch, rows = new_batch(BatchType.UNLOGGED), 0
                add(batch, change)
                rows += size
            work.append((batch, ()))
        rows_of_batches = chain(
            (
                [_row(home, e) for e in rows]
                for home, group in single_rows.items()
                for rows in write_batches(group, _BATCH_ROWS)
            ),
            (
                group
                for home in small_singles.keys() | small_atoms.keys()
                for group in atomic_batches(small_atoms.get(home, ()), small_singles.get(home, ()), _BATCH_ROWS)
            ),
        )
        write_unlogged(session, self.profile, insert, rows_of_batches, concurrency, write_ts)
        # A session that grew (one replaced by one) is a delete and an insert of
        # one partition: a prepared pair, many pairs to an UNLOGGED batch, a pair never cut.
        delete_cql = (
            f"DELETE FROM {self.qualified} WHERE partition = ? AND segment = ? AND key = ?"
            " AND session_end = ? AND session_start = ?"
        )
        pairs_of_batches = (
            [(*home, old.key, old.end_ms, old.start_ms, *_row(home, new)) for old, new in pairs]
            for home, group in moves.items()
            for pairs in _pair_batches(group)
        )
        write_unlogged(session, self.profile, f"{delete_cql}; {insert}", pairs_of_batches, concurrency, write_ts)
        execute_concurrent(
            session, work, concurrency=concurrency, raise_on_first_error=True, execution_profile=self.profile
        )
        if plan.after:  # once everything above is acknowledged
            deletes = [(delete, (*stamp, *home, e.key, e.end_ms, e.start_ms)) for home, e in plan.after]
            execute_concurrent(
                session, deletes, concurrency=concurrency, raise_on_first_error=True, execution_profile=self.profile
            )

    def find(
        self, session, key: bytes, segments: list[int], earliest_end: int, latest_start: int
    ) -> Iterator[SessionEntry]:
        """`key`'s sessions with end >= earliest_end and start <= latest_start among
        `segments` (ascending), by end then start."""
        select = prepare(
            session,
            f"SELECT {_COLUMNS} FROM {self.qualified} WHERE partition = ? AND segment = ? AND key = ?"
            " AND session_end >= ?",
        )
        select.is_idempotent = True
        partition = self.partition_of(key)
        for segment in segments:
            for row in paged(session, select, (partition, segment, key, earliest_end), 5000, self.profile):
                if row.session_start <= latest_start:
                    yield _entry(row)

    def find_many(
        self, session, asks: list[tuple[bytes, int, int]], segments: list[int], concurrency: int
    ) -> dict[bytes, list[SessionEntry]]:
        """For each (key, earliest_end, latest_start), as `find`: up to _READ_KEYS keys of one
        store partition per query (`key IN ?`, the lowest earliest end of them as the bound;
        each key's own bounds checked on the rows read), all queries concurrently. One query
        for many keys of a Cassandra partition reads that partition once, where a query per key
        would look it up in every SSTable again. A Found when this table notes TTLs (NotesTtl:
        `expiring` holds the keys of which a session read carries one)."""
        select = prepare(
            session,
            f"SELECT {self._read_columns(_COLUMNS)} FROM {self.qualified} WHERE partition = ? AND segment = ?"
            " AND key IN ? AND session_end >= ?",
        )
        select.is_idempotent = True
        bounds = {key: (earliest_end, latest_start) for key, earliest_end, latest_start in asks}
        by_partition: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        for key, (earliest_end, _) in bounds.items():
            by_partition[self.partition_of(key)].append((earliest_end, key))
        work = []
        for partition, group in by_partition.items():
            for chunk in chunked(sorted(group), _READ_KEYS):
                lowest = chunk[0][0]
                keys = [key for _, key in chunk]
                first = self.windowing.segment_of(lowest)
                work.extend((select, (partition, segment, keys, lowest)) for segment in segments if segment >= first)
        found: dict[bytes, list[SessionEntry]] = self._new_found()
        for result in execute_concurrent(
            session, work, concurrency=concurrency, results_generator=True, execution_profile=self.profile
        ):
            for row in result.result_or_exc:
                earliest_end, latest_start = bounds[row.key]
                if row.session_end >= earliest_end and row.session_start <= latest_start:
                    found.setdefault(row.key, []).append(_entry(row))
                    if self.notes_ttl and row.ttl is not None:
                        found.expiring.add(row.key)
        return found

    def scan(
        self, session, segments: list[int], key_range: KeyRange = EVERYTHING, page_size: int = 5000
    ) -> Iterator[SessionEntry]:
        """Sessions of keys in `key_range` among `segments`, by key, then end, then start:
        every store partition of every segment read concurrently and merged."""
        condition, params = range_condition(key_range)
        select = prepare(
            session, f"SELECT {_COLUMNS} FROM {self.qualified} WHERE partition = ? AND segment = ?{condition}"
        )
        select.is_idempotent = True
        streams = [
            (_entry(row) for row in paged(session, select, (partition, segment, *params), page_size, self.profile))
            for segment in segments
            for partition in range(self.spec.partitions)
        ]
        return merge_in_order(streams, key=_order)

    def read_split(
        self, session, split: Split, end_from: int = 0, end_to: int = 2**63 - 1, page_size: int = 5000
    ) -> Iterator[SessionEntry]:
        """The sessions of `split` (statestore.store.tables.splits) ending in [end_from, end_to]:
        its keys' (one slice per key and Cassandra partition), or its key range's."""
        return self._read_split(session, split, end_from, end_to, page_size)
