"""Cassandra, as far as one key-value store's stream sees it: the store's registry row (its
progress, statestore.store.book.registry), the store's table and its dead-letter table.

What matters of the real system and is kept:
- the registry's progress updates mirror registry.begin_batch / record_batch / take_epoch /
  record_topic_id column by column, each conditional on the writer's epoch (registry._fenced:
  StoreFencedError when a newer writer took the store), and are atomic (lightweight transactions);
- a lightweight transaction may end in a timeout whose outcome the writer cannot tell (a
  WriteTimeout of write type CAS, as the driver raises it): applied, not applied, or accepted
  by a replica and not yet committed, which the next Paxos round on the row (any later
  transaction or serial read) commits first (`lwt_faults`, chosen by the scheduler). Plain
  reads (`progress`, the checker's) see only what is committed;
- the store's lease row (statestore.store.book.lease): its holder and checkpoint, renewed while
  its holder runs, expiring one TTL after the last renewal once its holder stopped renewing
  (crashed, or paused); a reset's has no TTL (admin.RESET_LEASE_DURABLE): it stays until the
  reset releases it or a reset run again with --writer-stopped takes it over;
- the store's rows are written one key at a time (a batch's writes are many statements, so a
  crash can leave a batch half written), each `USING TIMESTAMP` of its batch: a write older than
  the row's last one loses; at an equal timestamp Cassandra keeps, cell by cell, the larger
  value (a null, a tombstone, wins), which is what two writers of the same batch get;
- dead letters are rows keyed by (topic, partition, offset, reason): writing one again changes
  nothing;
- the store's table may be dropped (by hand): writes to it fail as Cassandra's do ("unconfigured
  table"), and a start creates it again only while the registry records no batches
  (provision: StoreTableLostError); `statestore reset` (admin.truncate_store) as the partitioned
  key-value layout does it: the epoch taken, the table truncated in place (or, when it is gone,
  a new generation of it) after an epoch check that cannot make it conditional (a reset may
  pause in between: reset_fenced, then reset_deleting), the dead letters truncated, every partition deleted at the floor
  timestamp (the registry's last_ts / pending_ts: a later write at or below it is shadowed) and
  the progress cleared with the floor kept as last_ts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta

from cassandra import InvalidRequest, WriteTimeout, WriteType

from statestore.core.codecs import millis_of
from statestore.core.errors import StoreFencedError, StoreTableLostError
from statestore.core.model import Entry
from statestore.store import admin
from statestore.store.book.registry import BatchPosition, KafkaOffsets, StoreProgress

_EPOCH = datetime(1970, 1, 1)


def moment_of(ms: int) -> datetime:
    """A naive-UTC datetime of epoch ms, as the Cassandra driver returns timestamps."""
    return _EPOCH + timedelta(milliseconds=ms)


def _offsets_text(offsets: KafkaOffsets | None) -> str | None:
    """registry._offsets_text."""
    return None if offsets is None else offsets.as_json()


@dataclass(frozen=True)
class StoredRow:
    """A row of the store's table: the entry and the write timestamp it was written with."""

    entry: Entry
    write_ts: int


@dataclass(frozen=True)
class DeadLetterKey:
    """The primary key of a dead letter (deadletters.create_cql), and the batch that wrote it."""

    partition: int
    offset: int
    reason: str


@dataclass
class LeaseRow:
    """The store's lease row: who holds it, for which checkpoint, and until when (epoch ms; None:
    its holder runs and renews it every third of the TTL)."""

    holder: str
    checkpoint: str
    expires_ms: int | None = None


@dataclass(frozen=True)
class ResetTicket:
    """What a reset knows once it fenced the store (FakeCassandra.reset_fenced): its epoch, and
    the floor of its partition deletes."""

    epoch: int
    floor: int | None
    fenced: int | None = None  # the fenced batch it records (admin.fenced_after_reset)


# The outcomes of a lightweight transaction that times out (FakeCassandra.lwt_faults).
LWT_APPLIED, LWT_LOST, LWT_LATE = "applied", "not applied", "accepted, committed by the next Paxos round"


def newer_cell(held, written):
    """The cell Cassandra keeps of two written with the same timestamp: a tombstone (None), else
    the larger value."""
    if held is None or written is None:
        return None
    return max(held, written)


@dataclass
class FakeCassandra:
    """The registry row of the one store, its table and its dead letters."""

    store: str = "words"
    progress_row: StoreProgress = field(
        default_factory=lambda: StoreProgress(None, None, None, "words", None, 0, None, None, None, None, None)
    )
    rows: dict[bytes, StoredRow] = field(default_factory=dict)
    dead_letters: dict[DeadLetterKey, int] = field(default_factory=dict)  # -> the batch that wrote it
    lease: LeaseRow | None = None
    # How the next registry transactions end when they time out (LWT_*), one each; empty: they answer.
    lwt_faults: list[str] = field(default_factory=list)
    # A transaction accepted and not committed (LWT_LATE): the next Paxos round commits it.
    in_flight: tuple[dict, BatchPosition | None] | None = None
    # The position of every record_batch committed, in order (what the checker learns batches from).
    recorded: list[BatchPosition] = field(default_factory=list)
    table_present: bool = True
    table_generation: int = 0  # the table's generation (a reset of a lost table moves to the next)
    floor_ts: int | None = None  # a reset's partition deletes: a write at or below it is shadowed
    # The same deletes of the dead-letter table, which a relayout leaves where they are (it moves
    # the entries to a new table, without deletes, but not the dead letters).
    letters_floor_ts: int | None = None
    # Hooks of tests/simulation/operator_events.py (relayout, drop-store, reads at a weak level):
    first_epoch: int = 1  # registry.first_epoch of the store as (re)created
    kept: dict[int, dict[bytes, StoredRow]] = field(default_factory=dict)  # tables a relayout left, by generation
    dropped_tables: set[str] = field(default_factory=set)  # the tables drop-store recorded (book.dropped)
    swap_in_flight: Callable[[], None] | None = None  # a relayout's swap accepted, not yet committed
    weak_reads: bool = False  # the entries' level may miss a write not yet at quorum (level_for)
    stale_view: dict[bytes, StoredRow] | None = None  # what such a read sees: a lagging data center's rows

    # --- the registry (statestore.store.book.registry) ---

    def progress(self) -> StoreProgress:
        """The store's progress as committed (a plain read; the checker's)."""
        return self.progress_row

    def serial_progress(self) -> StoreProgress:
        """registry.progress: a serial read, which first commits a transaction left accepted."""
        self._commit_in_flight()
        return self.progress_row

    def _commit_in_flight(self) -> None:
        if self.in_flight is not None:
            (columns, recorded), self.in_flight = self.in_flight, None
            self._commit(columns, recorded)
        if self.swap_in_flight is not None:
            swap, self.swap_in_flight = self.swap_in_flight, None
            swap()

    def _commit(self, columns: dict, recorded: BatchPosition | None) -> None:
        self.progress_row = replace(self.progress_row, **columns)
        if recorded is not None:
            self.recorded.append(recorded)

    def _lwt(
        self, applies: bool, refused: Exception | None, what: str, recorded: BatchPosition | None = None, **columns
    ) -> None:
        """A lightweight transaction on the registry row: its Paxos round first commits one left
        accepted; then the update when `applies` (else `refused` is raised), or the timeout the
        scheduler chose (lwt_faults), its outcome unknown to the writer."""
        self._commit_in_flight()
        fault = self.lwt_faults.pop(0) if self.lwt_faults else None
        if not applies:
            raise refused
        if fault == LWT_LATE:
            self.in_flight = columns, recorded
        elif fault != LWT_LOST:
            self._commit(columns, recorded)
        if fault is not None:
            raise WriteTimeout(f"{what}: CAS operation timed out ({fault})", write_type=WriteType.CAS)

    def next_epoch(self, current: int | None) -> int:
        """registry.take_epoch's next epoch: the store's first (first_epoch) or the one after `current`."""
        return self.first_epoch if current is None else current + 1

    def take_epoch(self) -> int:
        """registry.take_epoch: the store's next epoch, for a writer that now holds the lease (a
        serial read of the epoch, then a transaction conditional on it)."""
        epoch = self.next_epoch(self.serial_progress().epoch)
        self._lwt(True, None, "taking the store's epoch", epoch=epoch)
        return epoch

    def record_fenced_batch(self, batch_id: int, epoch: int) -> None:
        """registry.record_fenced_batch: the batch an earlier writer began, recorded as fenced."""
        self._fenced(epoch, f"recording batch {batch_id} as fenced", fenced_batch=batch_id)

    def _fenced(self, epoch: int | None, what: str, recorded: BatchPosition | None = None, **columns) -> None:
        """registry._fenced: the update, conditional on the store's epoch still being `epoch`."""
        self._commit_in_flight()
        refused = StoreFencedError(
            f"store '{self.store}': this writer (epoch {epoch}) was fenced off while {what}: the store was taken "
            f"over by a newer writer (epoch {self.progress_row.epoch})"
        )
        self._lwt(epoch is None or self.progress_row.epoch == epoch, refused, what, recorded, **columns)

    def record_topic_id(self, topic_id: str, epoch: int) -> None:
        """registry.record_topic_id."""
        self._fenced(epoch, "recording its source topic", topic_id=topic_id)

    def begin_batch(self, position: BatchPosition, epoch: int | None) -> None:
        """registry.begin_batch: SET pending_batch_id, pending_ts, offsets (the batch's start),
        pending_offsets (its end), query_id, batch_base, pending_rules (the batch's rules)."""
        self._fenced(
            epoch,
            f"beginning batch {position.batch_id}",
            pending_batch_id=position.batch_id,
            pending_ts=position.write_ts,
            offsets=_offsets_text(position.start),
            pending_offsets=_offsets_text(position.end),
            query_id=position.query_id,
            batch_base=position.batch_base,
            pending_rules=position.rules,
        )

    def record_batch(self, position: BatchPosition, max_event_time_ms: int | None, epoch: int | None) -> None:
        """registry.record_batch: SET last_batch_id, last_ts, offsets (the batch's end),
        max_event_time (only ever growing: a batch with no events, or earlier ones, leaves it)."""
        current = self.serial_progress().max_event_time
        if max_event_time_ms is None or (current is not None and millis_of(current) >= max_event_time_ms):
            max_event_time_ms = None if current is None else millis_of(current)
        self._fenced(
            epoch,
            f"recording batch {position.batch_id}",
            position,
            last_batch_id=position.batch_id,
            last_ts=position.write_ts,
            offsets=_offsets_text(position.end),
            max_event_time=None if max_event_time_ms is None else moment_of(max_event_time_ms),
            last_batch_at=moment_of(0),
        )

    # --- the store's table and its dead letters ---

    def read_entries(self, keys: list[bytes]) -> dict[bytes, Entry]:
        """The current entries of `keys` (those the store holds); at a weak level (weak_reads),
        those of a lagging data center (stale_view) when there is one."""
        rows = self.stale_view if self.weak_reads and self.stale_view is not None else self.rows
        return {key: rows[key].entry for key in keys if key in rows}

    def write_entry(self, entry: Entry, write_ts: int, generation: int | None = None) -> None:
        """One key's write, `USING TIMESTAMP write_ts`, to the table of `generation` (None: the
        current one): lost if the row holds a later write or a reset's delete shadows it; at the
        same timestamp, merged cell by cell (newer_cell). InvalidRequest when the table is gone."""
        if generation in self.kept:  # a table a relayout left behind, still there: the write lands in it
            if write_ts >= getattr(self.kept[generation].get(entry.key), "write_ts", write_ts):
                self.kept[generation][entry.key] = StoredRow(entry, write_ts)
            return
        if not self.table_present or generation not in (None, self.table_generation):
            raise InvalidRequest(f"unconfigured table {self.store}" + (f"_r{generation}" if generation else ""))
        if self.floor_ts is not None and write_ts <= self.floor_ts:
            return
        held = self.rows.get(entry.key)
        if held is not None and held.write_ts == write_ts:
            merged = [newer_cell(a, b) for a, b in zip(held.entry[1:], entry[1:], strict=True)]
            entry = Entry(entry.key, *merged)
        if held is None or held.write_ts <= write_ts:
            self.rows[entry.key] = StoredRow(entry, write_ts)
            if self.stale_view is not None:  # the writer's own data center has it
                self.stale_view[entry.key] = self.rows[entry.key]

    def write_dead_letter(self, key: DeadLetterKey, batch_id: int, write_ts: int | None = None) -> None:
        """deadletters.write, `USING TIMESTAMP write_ts` (None: the server's clock, after every
        batch): shadowed by a reset's deletes at its floor (deadletters.delete_partitions_before,
        of every partition the store's offsets name: every partition a batch of it read)."""
        if write_ts is not None and self.letters_floor_ts is not None and write_ts <= self.letters_floor_ts:
            return
        self.dead_letters[key] = batch_id

    def record_retention(self, retention_ms: int | None) -> None:
        """registry.record_retention (`statestore set-retention`): a transaction, IF EXISTS, not fenced."""
        self._commit_in_flight()
        self.progress_row = replace(self.progress_row, retention_ms=retention_ms)

    # --- the store's table: provision, dropped by hand, reset ---

    def provision(self) -> None:
        """provision.provision_store: the table created if it is missing, unless the registry
        records batches of the store (_refuse_if_it_holds_batches: StoreTableLostError)."""
        if self.table_present:
            return
        if self.serial_progress().has_batches:
            raise StoreTableLostError(
                f"store '{self.store}': its table is gone, but the registry records its batches. Nothing was "
                f"written. Restore the table from a backup, or start the store over: `statestore reset {self.store} "
                "--yes`, then a new, empty --checkpoint counts from --starting-offsets."
            )
        self.table_present = True

    def drop_table(self) -> None:
        """DROP TABLE by hand (or a drop-store interrupted before its unregister)."""
        self.rows.clear()
        self.table_present = False

    def reset(self, writer_stopped: bool = False) -> None:
        """admin.truncate_store of a partitioned key-value store, once it holds the lease (see
        the module doc): reset_fenced, then at once reset_deleting."""
        self.reset_deleting(self.reset_fenced(writer_stopped))

    def reset_fenced(self, writer_stopped: bool = False) -> ResetTicket:
        """truncate_store up to its TRUNCATE of the store's table: the store's next epoch taken,
        the progress read (the floor: last_ts / pending_ts), the epoch read serially again
        (_truncate's check_epoch). The reset's own transactions do not time out here."""
        self._commit_in_flight()
        epoch = self.next_epoch(self.progress_row.epoch)
        self.progress_row = replace(self.progress_row, epoch=epoch)
        progress = self.progress_row
        floor = max((t for t in (progress.last_ts, progress.pending_ts) if t is not None), default=None)
        return ResetTicket(epoch, floor, admin.fenced_after_reset(progress, writer_stopped))

    def reset_deleting(self, ticket: ResetTicket) -> None:
        """The rest of truncate_store, from its TRUNCATE of the store's table (not conditional:
        whoever holds the store now loses its entries), then the dead letters' epoch check
        (StoreFencedError, the dead letters and progress left), TRUNCATE, the partitions deleted
        at the floor, and the progress cleared conditional on the reset's epoch."""
        self._commit_in_flight()
        if not self.table_present:  # _move_to_new_table: the next generation, empty
            self.table_generation = max((self.table_generation, *self.kept)) + 1  # the next free name
            self.table_present = True
        self.rows.clear()
        if self.progress_row.epoch != ticket.epoch:
            raise StoreFencedError(
                f"store '{self.store}': this writer (epoch {ticket.epoch}) was fenced off while about to truncate "
                f"its dead letters: the store was taken over by a newer writer (epoch {self.progress_row.epoch})"
            )
        self.dead_letters.clear()
        floor = ticket.floor
        if floor is not None:  # _shadow_partitions, and deadletters.delete_partitions_before
            self.floor_ts = max(self.floor_ts or 0, floor)
            self.letters_floor_ts = max(self.letters_floor_ts or 0, floor)
        cleared = dict.fromkeys(
            ("last_batch_id", "offsets", "pending_batch_id", "pending_ts", "pending_offsets", "pending_rules"), None
        )
        cleared.update(dict.fromkeys(("query_id", "batch_base", "max_event_time", "last_batch_at"), None))
        self.progress_row = replace(self.progress_row, last_ts=floor, fenced_batch=ticket.fenced, **cleared)

    # --- the store's lease (statestore.store.book.lease) ---

    def live_lease(self, now_ms: int) -> LeaseRow | None:
        """The lease row, unless its TTL ran out (then it is gone)."""
        if self.lease is not None and self.lease.expires_ms is not None and self.lease.expires_ms <= now_ms:
            self.lease = None
        return self.lease

    def describe_progress(self) -> str:
        row = self.progress_row
        shown = (
            "last_batch_id", "offsets", "pending_batch_id", "pending_offsets", "pending_ts", "query_id", "epoch",
            "retention_ms", "max_event_time",
        )  # fmt: skip
        return ", ".join(f"{f.name}={getattr(row, f.name)}" for f in fields(row) if f.name in shown)
