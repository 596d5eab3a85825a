"""The operator's other actions between runs, and reads at the entries' consistency level, as
rules of the key-value state machine (machine.BatchProtocolMachine composes OperatorEvents, so
every kind that subclasses it takes them; each is gated on StreamJob.protocol_faults, as the
lease and reset rules are):

- `statestore relayout` (statestore.store.relayout.relayout_store): refused while anyone holds
  the store's lease, or while a batch is begun and not recorded; else its lease, the store's next
  epoch, the rows copied into a new table (a new generation of the fake's table) at the
  registry's last_ts, then the swap, a lightweight transaction conditional on the store's table
  and that epoch, which may time out applied, not applied, or accepted and committed by the
  next Paxos round. A failed relayout settles what to do with its new table on a serial read of
  the registry through the real relayout.settle_failed_relayout; a relayout killed before it
  settles leaves its lease to lapse and its accepted swap to the next Paxos round. It may pause
  after its last lease check for longer than its lease (paused_relayout_resumes): a stream that
  took the store meanwhile took the next epoch, and the swap is refused. The old table is kept,
  as the real relayout keeps it: a writer that resolved it (a paused one) writes there. A
  relayout's clean-up that drops the table the store uses fails the run (StoreTableDropped).
- `drop-store` then the store created again under its name (admin.drop_store): refused while a
  lease is held, and while a batch is begun and not recorded or a reset cleared one such (the
  registry's fenced_batch: admin.fenced_after_reset) unless --writer-stopped (the real
  admin.drop_refusal); with it, the operator has made sure the paused writer is gone. The store
  created again starts at a first epoch the scheduler draws (registry.first_epoch is random),
  with the table of the store's first name: CREATE TABLE IF NOT EXISTS, so a table a relayout
  left under that name is the new store's. The stream then runs on a new, empty checkpoint.
- `statestore migrate` (schema.migrate_store): it adds missing tables and records the schema
  version, nothing any batch reads or writes: refused while a lease is held, else a no-op here.
- The entries' consistency level (--dml-consistency) for a keyspace in one or two data
  centers, through the real conn.cassandra.level_for (check_writer_scope refuses a LOCAL_
  level on two before anything is written); a data center's replicas fall behind, and a writer
  restarted there reads, at a level that does not reach a quorum of every data center, the
  entries as of then (FakeCassandra.stale_view); the default (QUORUM) reads the latest.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from statestore.conn import cassandra as cassandra_levels
from statestore.core.errors import ConfigError
from statestore.core.names import store_table, table_generation
from statestore.store import admin, relayout
from statestore.store.book import dropped
from statestore.store.book.registry import StoreProgress
from tests.simulation.driver import LEASE_TTL_MS
from tests.simulation.fake_cassandra import LWT_APPLIED, LWT_LATE, LWT_LOST, LeaseRow, StoredRow

SWAP_OUTCOMES = (None, None, LWT_APPLIED, LWT_LOST, LWT_LATE)  # None: the swap answers
DML_SETTINGS = ("auto", "QUORUM", "LOCAL_QUORUM")
# Levels whose reads reach a quorum of every data center's replicas (what level_for's "auto" is).
_STRONG = frozenset({"QUORUM", "ALL", "EACH_QUORUM", "SERIAL"})


class StoreTableDropped(AssertionError):
    """An operator action dropped the table the store uses (a relayout's clean-up)."""


def _table(generation: int) -> str:
    """The store's table name of a generation (relayout.next_table's `<store>_store_r<k>`)."""
    return store_table("words") if generation == 0 else f"{store_table('words')}_r{generation}"


def weak(level: str, data_centers: int) -> bool:
    """Whether reads at `level` may miss a write acknowledged at that level elsewhere."""
    return not (level in _STRONG or (level == "LOCAL_QUORUM" and data_centers == 1))


class OperatorEvents:
    """The rules (see the module doc); mixed into machine.BatchProtocolMachine."""

    paused_relayout = None  # (holder, epoch, old generation, new generation, copied rows), once paused
    data_centers = 1
    other_dc: dict | None = None  # the rows as of when the other data center's replicas fell behind

    def _operator_idle(self) -> bool:
        return (
            self.job is None
            and self.refusal is None
            and self.paused_reset is None
            and self.paused_relayout is None
            and self.job_class.protocol_faults()
        )

    # --- relayout ---

    @precondition(lambda self: self._operator_idle() and self.world.cassandra.table_present)
    @rule(swap=st.sampled_from(SWAP_OUTCOMES), pause=st.booleans(), killed=st.booleans())
    def operator_relays_out(self, swap: str | None, pause: bool, killed: bool) -> None:
        """`statestore relayout` between runs (see the module doc): paused after its last lease
        check past its lease (`pause`), or its swap ending as `swap`, its process `killed` before
        it settles a swap that timed out."""
        cassandra, world = self.world.cassandra, self.world
        self.steps = []
        held = cassandra.live_lease(world.clock_ms)
        if held is not None:
            self.steps.append(f"statestore relayout refused (LeaseHeldError): {held.holder} holds the store")
            return
        holder = f"statestore relayout ({world.new_holder()})"
        cassandra.lease = LeaseRow(holder, "(none: a relayout)")
        cassandra._commit_in_flight()
        epoch = cassandra.next_epoch(cassandra.progress_row.epoch)  # registry.take_epoch
        cassandra.progress_row = replace(cassandra.progress_row, epoch=epoch)
        progress = cassandra.serial_progress()
        if progress.unfinished_batch is not None:
            self.steps.append(f"statestore relayout refused (WriterMayBeLiveError): batch {progress.unfinished_batch}")
            cassandra.lease = None
            return
        old = cassandra.table_generation
        new = max((old, *cassandra.kept)) + 1  # relayout.next_table
        ts = progress.last_ts if progress.last_ts is not None else world.now_us()
        copied = {key: StoredRow(row.entry, ts) for key, row in cassandra.rows.items()}
        cassandra.kept[new] = copied  # created, holding the verified copy
        self.steps.append(f"{holder} took epoch {epoch}, copied {len(copied)} rows into {_table(new)}")
        if pause:
            cassandra.lease.expires_ms = world.clock_ms + LEASE_TTL_MS
            world.clock_ms += LEASE_TTL_MS + 1
            self.paused_relayout = holder, epoch, old, new
            self.steps.append(f"{holder} paused before its swap: its lease lapsed")
            return
        self._swap(holder, epoch, old, new, swap, killed)

    @precondition(lambda self: self.paused_relayout is not None)
    @rule(swap=st.sampled_from(SWAP_OUTCOMES), killed=st.booleans())
    def paused_relayout_resumes(self, swap: str | None, killed: bool) -> None:
        """The paused relayout goes on with its swap (its lease lapsed; a stream may have taken
        the store and its next epoch meanwhile)."""
        (holder, epoch, old, new), self.paused_relayout = self.paused_relayout, None
        self.steps = [f"the paused {holder} goes on"]
        self._swap(holder, epoch, old, new, swap, killed)

    def _swap(self, holder: str, epoch: int, old: int, new: int, outcome: str | None, killed: bool) -> None:
        """registry.swap_table (IF table_name = old AND epoch = epoch), then, if it failed,
        relayout.settle_moved_table through the real settle_failed_relayout, and the lease released."""
        cassandra = self.world.cassandra
        cassandra._commit_in_flight()  # the swap's Paxos round
        applies = cassandra.progress_row.epoch == epoch and cassandra.table_generation == old

        def commit() -> None:
            cassandra.kept[old] = cassandra.rows
            cassandra.rows = cassandra.kept.pop(new)
            cassandra.table_generation, cassandra.floor_ts = new, None
            if cassandra.stale_view is not None:
                cassandra.stale_view = dict(cassandra.rows)

        if applies and outcome == LWT_LATE:
            cassandra.swap_in_flight = commit
        elif applies and outcome != LWT_LOST:
            commit()
        if applies and outcome is None:
            self.steps.append(f"{holder}: the store now uses {_table(new)}; {_table(old)} kept")
            self._release(holder)
            return
        failure = f"timed out ({outcome})" if applies else "refused (StoreFencedError or StoreMismatchError)"
        self.steps.append(f"{holder}: the swap {failure}")
        if killed and applies:
            self.steps.append(f"{holder} killed before it settled: its lease lapses")
            if cassandra.lease is not None and cassandra.lease.holder == holder:
                cassandra.lease.expires_ms = self.world.clock_ms + LEASE_TTL_MS
            return
        cassandra._commit_in_flight()  # registry.registered_table: a serial read
        registered = (_table(cassandra.table_generation), cassandra.progress_row.epoch)
        action = relayout.settle_failed_relayout(_table(new), epoch, True, registered)
        self.steps.append(f"{holder} settled: {action} ({_table(new)}; the registry: {registered})")
        if action == relayout.DROP:
            if cassandra.table_generation == new:
                cassandra.rows = {}
                cassandra.table_present = False
                raise StoreTableDropped(self._report([f"{holder} dropped {_table(new)}, the table the store uses"]))
            cassandra.kept.pop(new, None)
        self._release(holder)

    def _release(self, holder: str) -> None:
        lease = self.world.cassandra.lease
        if lease is not None and lease.holder == holder:
            self.world.cassandra.lease = None

    # --- drop-store, create again ---

    @precondition(lambda self: self._operator_idle() and self.paused_relayout is None)
    @rule(writer_stopped=st.booleans(), first_epoch=st.sampled_from((1, 2, 7, 2**40, 2**62 - 2)))
    def operator_drops_and_creates_store(self, writer_stopped: bool, first_epoch: int) -> None:
        """admin.drop_store (refused while a lease is held, or a batch is pending unless
        `writer_stopped`: then the paused writer is gone), then create_store under the same name
        at `first_epoch`, and the stream on a new, empty checkpoint."""
        cassandra, world = self.world.cassandra, self.world
        self.steps = []
        held = cassandra.live_lease(world.clock_ms)
        if held is not None:
            self.steps.append(f"drop-store refused (LeaseHeldError): {held.holder} holds the store")
            return
        progress = cassandra.serial_progress()
        refusal = admin.drop_refusal(
            cassandra.store, progress.unfinished_batch, writer_stopped, fenced=progress.fenced_batch
        )
        if refusal is not None:
            self.steps.append(f"drop-store refused (WriterMayBeLiveError): {refusal}")
            return
        if writer_stopped and self.zombie is not None:
            self.zombie = None
            self.steps.append("the paused driver's process is gone (--writer-stopped)")
        names = {_table(generation): generation for generation in cassandra.kept}
        tables = admin.tables_to_drop(cassandra.store, _table(cassandra.table_generation), sorted(names))
        cassandra.dropped_tables |= set(tables)  # dropped.record_drop, before the DROPs
        for table in tables:
            cassandra.kept.pop(names.get(table), None)
        cassandra.rows, cassandra.dead_letters, cassandra.table_present = {}, {}, True
        cassandra.progress_row = StoreProgress(None, None, None, "words", None, 0, None, None, None, None, None)
        cassandra.first_epoch, cassandra.floor_ts, cassandra.in_flight = first_epoch, None, None
        cassandra.letters_floor_ts = None  # the dead-letter table dropped and created again too
        # provision: the store's first name, or past every table a dropped store used (dropped.table_after)
        table = dropped.table_after(_table(0), cassandra.dropped_tables)
        cassandra.table_generation = table_generation(table)[1]
        cassandra.rows = cassandra.kept.pop(cassandra.table_generation, {})
        if cassandra.stale_view is not None:
            cassandra.stale_view = dict(cassandra.rows)
        self.truth.forget(cassandra)
        self.replaced = world.checkpoint
        world.new_checkpoint()
        self.steps.append(
            f"store dropped and created again in {table} (first epoch {first_epoch}); a new, empty checkpoint"
        )

    # --- migrate ---

    @precondition(lambda self: self._operator_idle())
    @rule()
    def operator_migrates(self) -> None:
        """schema.migrate_store: refused while a lease is held; else nothing the protocol reads changes."""
        held = self.world.cassandra.live_lease(self.world.clock_ms)
        self.steps = ["statestore migrate " + ("refused (LeaseHeldError)" if held is not None else "(no-op here)")]

    # --- the entries' consistency level, and a lagging data center ---

    @precondition(lambda self: self.job is None and self.job_class.protocol_faults())
    @rule(setting=st.sampled_from(DML_SETTINGS), data_centers=st.integers(1, 2))
    def operator_sets_dml_consistency(self, setting: str, data_centers: int) -> None:
        """--dml-consistency for the next runs, on a keyspace in `data_centers`: refused by the
        real level_for (check_writer_scope, before anything is written: the setting is not
        taken), or taken; a repair first brings every data center up to date."""
        dcs = {f"dc{n}" for n in range(1, data_centers + 1)}
        try:
            level = cassandra_levels.level_for("entries", setting, "ks", dcs)
        except ConfigError as refused:
            self.steps = [f"--dml-consistency {setting} refused: {refused}"]
            return
        cassandra = self.world.cassandra
        self.data_centers, self.other_dc, cassandra.stale_view = data_centers, None, None
        cassandra.weak_reads = weak(level, data_centers)
        self.steps = [f"--dml-consistency {setting} ({level}) on {data_centers} data center(s)"]

    @precondition(lambda self: self.data_centers > 1 and self.other_dc is None and self.job_class.protocol_faults())
    @rule()
    def other_dc_falls_behind(self) -> None:
        """The other data center's replicas stop receiving the store's writes for now."""
        self.other_dc = dict(self.world.cassandra.rows)
        self.steps = ["the other data center's replicas fall behind"]

    @precondition(lambda self: self.refusal is None and self.other_dc is not None)
    @rule()
    def writer_restarts_in_other_dc(self) -> None:
        """The job (killed first, if it runs) restarts with its driver and executors in the
        lagging data center: reads below a quorum of every data center see its rows
        (FakeCassandra.stale_view)."""
        self.steps = []
        if self.job is not None:
            self._crash()
        self.world.cassandra.stale_view, self.other_dc = self.other_dc, None
        self.steps.append("the next run is in the lagging data center")
