"""What a store's stream did, kept in Cassandra so it outlives the driver: one row per applied
batch and one per state change of the stream (the analog of Kafka Streams' state listener).

    statestore_batches        ((store), batch_id DESC): the apply's figures of each batch
    statestore_stream_states  ((store), at DESC): starting, waiting_for_lease, recovering,
                              running, stopping, stopped, failed, with the reason; refused:
                              a run that another writer kept from the lease (never the store's
                              state: see statestore.store.book.status.store_state)

Both are bounded by a table TTL (BATCH_TTL_S, STATE_TTL_S): a stream writing a batch every
second keeps about 600,000 small rows per store, in one Cassandra partition per store. This
module owns their CQL; statestore.store.book.status reads them for `statestore status` and metrics.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from statestore.conn.cassandra import BOOKKEEPING_PROFILE, DDL_PROFILE, add_missing_columns, prepare, table_metadata
from statestore.core.codecs import millis_of
from statestore.core.names import validate_keyspace, validate_store_name

BATCHES_TABLE = "statestore_batches"
STATES_TABLE = "statestore_stream_states"
BATCH_TTL_S = 7 * 86_400
STATE_TTL_S = 30 * 86_400

STARTING, WAITING_FOR_LEASE, RECOVERING, RUNNING = "starting", "waiting_for_lease", "recovering", "running"
STOPPING, STOPPED, FAILED = "stopping", "stopped", "failed"
REFUSED = "refused"  # another writer holds the lease: this run never wrote the store
STATES = (STARTING, WAITING_FOR_LEASE, RECOVERING, RUNNING, STOPPING, STOPPED, FAILED, REFUSED)
ACTIVE = (STARTING, WAITING_FOR_LEASE, RECOVERING, RUNNING, STOPPING)  # a driver is (or was last seen) alive


@dataclass(frozen=True)
class Totals:
    """Running sums over the store's batches up to and including one: what the metrics give
    as counters (they carry on from the previous batch's row, across drivers)."""

    written: int = 0
    skipped: int = 0
    words: int = 0
    dead_letters: tuple[tuple[str, int], ...] = ()  # (reason, how many), by reason

    def plus(self, written: int, skipped: int, words: int, letters: tuple[tuple[str, int], ...]) -> Totals:
        merged = dict(self.dead_letters)
        for reason, count in letters:
            merged[reason] = merged.get(reason, 0) + count
        return Totals(self.written + written, self.skipped + skipped, self.words + words, tuple(sorted(merged.items())))


@dataclass(frozen=True, kw_only=True)
class BatchRecord:
    """One applied batch: the apply's figures, its duration and where it left the input."""

    batch_id: int
    spark_batch_id: int | None
    run_id: str | None
    recorded_at_ms: int | None = None  # Cassandra's time of the write: known on rows read back
    keys: int
    written: int
    skipped: int
    words: int
    dead_letters: int
    seconds: float
    end_offsets: str | None  # Spark's JSON of offsets: {"topic": {"partition": offset}}
    max_event_time_ms: int | None  # the store's event-time high-water mark after the batch
    dead_letter_reasons: tuple[tuple[str, int], ...] = ()
    totals: Totals = field(default_factory=Totals)


@dataclass(frozen=True)
class StateChange:
    state: str
    at_ms: int
    reason: str | None
    run_id: str | None
    host: str | None
    pid: int | None
    restart_seconds: float | None  # on `running`: from the run's start to its first committed batch
    writer: str | None = None  # the run's lease holder name (host:pid:id); None: logged by an older release


def create_cql(keyspace: str) -> list[str]:
    keyspace = validate_keyspace(keyspace)
    return [
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{BATCHES_TABLE} ("
        " store text, batch_id bigint, spark_batch_id bigint, run_id text, recorded_at timestamp,"
        " keys bigint, written bigint, skipped bigint, words bigint, dead_letters bigint, seconds double,"
        " end_offsets text, max_event_time timestamp, dead_letters_by_reason map<text, bigint>,"
        " written_total bigint, skipped_total bigint, words_total bigint, dead_letters_total map<text, bigint>,"
        " PRIMARY KEY ((store), batch_id))"
        f" WITH CLUSTERING ORDER BY (batch_id DESC) AND default_time_to_live = {BATCH_TTL_S}"
        " AND comment = 'statestore: the batches each store''s stream applied (bounded by TTL)'",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{STATES_TABLE} ("
        " store text, at timestamp, state text, reason text, run_id text, host text, pid int,"
        " restart_seconds double, writer text, PRIMARY KEY ((store), at))"
        f" WITH CLUSTERING ORDER BY (at DESC) AND default_time_to_live = {STATE_TTL_S}"
        " AND comment = 'statestore: state changes of each store''s stream (bounded by TTL)'",
    ]


_LATER_STATE_COLUMNS = (("writer", "text"),)  # added to a states table an older release made


def ensure_tables(session, keyspace: str, ddl_profile: object = DDL_PROFILE) -> tuple[str, ...]:
    """Create the stream log's tables, or add the columns an older release's lack; returns the
    columns added, as table.column."""
    for statement in create_cql(keyspace):
        session.execute(statement, execution_profile=ddl_profile)
    return add_missing_columns(session, keyspace, STATES_TABLE, _LATER_STATE_COLUMNS, ddl_profile)


def record_batch(session, keyspace: str, store: str, batch: BatchRecord) -> None:
    insert = prepare(
        session,
        f"INSERT INTO {validate_keyspace(keyspace)}.{BATCHES_TABLE} (store, batch_id, spark_batch_id, run_id,"
        " recorded_at, keys, written, skipped, words, dead_letters, seconds, end_offsets, max_event_time,"
        " dead_letters_by_reason, written_total, skipped_total, words_total, dead_letters_total)"
        " VALUES (?, ?, ?, ?, toTimestamp(now()), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    insert.is_idempotent = True  # a replayed batch rewrites its own row
    session.execute(
        insert,
        (
            validate_store_name(store),
            batch.batch_id,
            batch.spark_batch_id,
            batch.run_id,
            batch.keys,
            batch.written,
            batch.skipped,
            batch.words,
            batch.dead_letters,
            batch.seconds,
            batch.end_offsets,
            batch.max_event_time_ms,
            dict(batch.dead_letter_reasons),
            batch.totals.written,
            batch.totals.skipped,
            batch.totals.words,
            dict(batch.totals.dead_letters),
        ),
        execution_profile=BOOKKEEPING_PROFILE,
    )


class ChangeClock:
    """Milliseconds for state-change rows, strictly increasing within this process. `at` is the
    row's clustering key at Cassandra's millisecond precision, so two changes in one millisecond
    (`starting`, then `waiting_for_lease` as soon as the lease is refused) would be one row and
    the first change lost; the server's `now()` gives no such order."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._last_ms = 0
        self._lock = threading.Lock()

    def next_ms(self) -> int:
        with self._lock:
            self._last_ms = max(int(self._now() * 1000), self._last_ms + 1)
            return self._last_ms


_change_clock = ChangeClock()


def record_state(
    session,
    keyspace: str,
    store: str,
    state: str,
    *,
    reason: str | None = None,
    run_id: str | None = None,
    restart_seconds: float | None = None,
    writer: str | None = None,
) -> None:
    """`writer`: the name the run holds (or asks for) the store's lease under, which tells its
    rows from another run's."""
    if state not in STATES:
        raise ValueError(f"unknown stream state {state!r}: one of {', '.join(STATES)}")
    insert = prepare(
        session,
        f"INSERT INTO {validate_keyspace(keyspace)}.{STATES_TABLE} (store, at, state, reason, run_id, host, pid,"
        " restart_seconds, writer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    session.execute(
        insert,
        (
            validate_store_name(store),
            _change_clock.next_ms(),
            state,
            reason,
            run_id,
            socket.gethostname(),
            os.getpid(),
            restart_seconds,
            writer,
        ),
        execution_profile=BOOKKEEPING_PROFILE,
    )


_BATCH_COLUMNS = (
    "batch_id, spark_batch_id, run_id, recorded_at, keys, written, skipped, words, dead_letters,"
    " seconds, end_offsets, max_event_time, dead_letters_by_reason, written_total, skipped_total, words_total,"
    " dead_letters_total"
)


def recent_batches(session, keyspace: str, store: str, limit: int = 20) -> list[BatchRecord]:
    """The store's `limit` latest batches, newest first (none when no stream has logged any)."""
    if table_metadata(session, keyspace, BATCHES_TABLE) is None:
        return []
    select = prepare(
        session,
        f"SELECT {_BATCH_COLUMNS} FROM {validate_keyspace(keyspace)}.{BATCHES_TABLE} WHERE store = ? LIMIT ?",
    )
    rows = session.execute(select, (validate_store_name(store), limit), execution_profile=BOOKKEEPING_PROFILE)
    return [_record_of(r) for r in rows]


def batch_at_or_before(session, keyspace: str, store: str, batch_id: int) -> BatchRecord | None:
    """The newest logged batch whose id is at most `batch_id` (None: none is), in one read."""
    select = prepare(
        session,
        f"SELECT {_BATCH_COLUMNS} FROM {validate_keyspace(keyspace)}.{BATCHES_TABLE}"
        " WHERE store = ? AND batch_id <= ? LIMIT 1",
    )
    row = session.execute(select, (validate_store_name(store), batch_id), execution_profile=BOOKKEEPING_PROFILE).one()
    return None if row is None else _record_of(row)


def _record_of(r) -> BatchRecord:
    return BatchRecord(
        batch_id=r.batch_id,
        spark_batch_id=r.spark_batch_id,
        run_id=r.run_id,
        recorded_at_ms=_millis(r.recorded_at),
        keys=r.keys or 0,
        written=r.written or 0,
        skipped=r.skipped or 0,
        words=r.words or 0,
        dead_letters=r.dead_letters or 0,
        seconds=r.seconds or 0.0,
        end_offsets=r.end_offsets,
        max_event_time_ms=_millis(r.max_event_time),
        dead_letter_reasons=_pairs(r.dead_letters_by_reason),
        totals=Totals(r.written_total or 0, r.skipped_total or 0, r.words_total or 0, _pairs(r.dead_letters_total)),
    )


def totals_before(session, keyspace: str, store: str, batch_id: int) -> Totals:
    """The running sums of the newest logged batch before `batch_id` (zeros: none logged; a
    replayed batch carries on from the one before it, not from its own earlier attempt)."""
    earlier = batch_at_or_before(session, keyspace, store, batch_id - 1)
    return Totals() if earlier is None else earlier.totals


def _pairs(mapping) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((mapping or {}).items()))


def recent_states(session, keyspace: str, store: str, limit: int = 20) -> list[StateChange]:
    """The store's `limit` latest state changes, newest first (every run's, refused ones too)."""
    table = table_metadata(session, keyspace, STATES_TABLE)
    if table is None:
        return []
    writer = ", writer" if "writer" in table.columns else ""  # a table no stream of this release has used yet
    select = prepare(
        session,
        f"SELECT at, state, reason, run_id, host, pid, restart_seconds{writer}"
        f" FROM {validate_keyspace(keyspace)}.{STATES_TABLE} WHERE store = ? LIMIT ?",
    )
    rows = session.execute(select, (validate_store_name(store), limit), execution_profile=BOOKKEEPING_PROFILE)
    return [
        StateChange(
            r.state, millis_of(r.at), r.reason, r.run_id, r.host, r.pid, r.restart_seconds, getattr(r, "writer", None)
        )
        for r in rows
    ]


def _millis(moment: datetime | None) -> int | None:
    return None if moment is None else millis_of(moment)
