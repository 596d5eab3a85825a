"""Store management: list, create, describe, alter, truncate and drop stores.

The business rules of managing stores live here, so the Airflow hook (plugins/) and any
other front end only adapt them: options are validated by statestore.core.options before they
reach CQL, a store being written (its lease is held) is never truncated or dropped, and a
drop needs the store's own name as confirmation. No Airflow imports.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from cassandra.concurrent import execute_concurrent

from statestore.conn.cassandra import DDL_PROFILE, prepare, require_keyspace
from statestore.core import codecs
from statestore.core.aggregation.spec import AGGREGATE_FORMAT_PREFIX
from statestore.core.errors import (
    ConfirmationRequiredError,
    OptionError,
    StoreNotFoundError,
    UnsupportedOperationError,
    WriterMayBeLiveError,
)
from statestore.core.model import StoreSpec, StoreType
from statestore.core.names import (
    deadletter_table,
    next_generation_table,
    store_table,
    validate_keyspace,
    validate_store_name,
)
from statestore.core.options import TableOptions
from statestore.store.book import deadletters, dropped, registry
from statestore.store.book.lease import (
    RESET_CHECKPOINT,
    Holder,
    LeaseHeldError,
    StoreLease,
    current_holder,
    describe_self,
    held_message,
)
from statestore.store.book.registry import KafkaOffsets, StoreProgress
from statestore.store.builder import open_session_store, open_store, open_window_store
from statestore.store.provision import provision_store, table_exists
from statestore.store.retention import set_retention
from statestore.store.table_stats import SizeEstimate, cluster_figures
from statestore.store.tables import create_cql_for

_log = logging.getLogger(__name__)
_COMPACTION_PACKAGE = "org.apache.cassandra.db.compaction."


@dataclass(frozen=True)
class StoreListing:
    """A registered store and its progress (statestore_stores)."""

    spec: StoreSpec
    progress: StoreProgress


@dataclass(frozen=True)
class PartitionStats:
    """Entries per store partition (index = partition), counted exactly with one
    SELECT COUNT(*) per partition: each reads its whole partition inside Cassandra, so this
    costs a full scan of the table (fine for an admin action, not for a dashboard refresh).
    Versioned stores count rows, i.e. versions."""

    entries: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.entries)

    @property
    def skew(self) -> float | None:
        """Largest partition over the mean (1.0 = perfectly even; None when empty)."""
        if not self.total:
            return None
        return max(self.entries) / (self.total / len(self.entries))


@dataclass(frozen=True)
class StoreDescription:
    spec: StoreSpec
    schema_cql: str | None  # None: the registered table does not exist (created elsewhere, or dropped)
    table_options: TableOptions | None
    size: SizeEstimate | None  # Cassandra's estimate: flushed data only, refreshed every few minutes
    max_partition_mib: int | None
    partition_stats: PartitionStats | None  # partitioned types, when asked for
    progress: StoreProgress
    writer: Holder | None  # who holds the store's lease now
    nodes_answered: int = 1  # how many nodes' figures size and max_partition_mib combine
    nodes_total: int = 1

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON values (for XCom, the HTTP page and logs)."""
        stats = self.partition_stats
        return {
            "store": self.spec.name,
            "keyspace": self.spec.keyspace,
            "type": self.spec.store_type.value,
            "table": self.spec.table,
            "partitions": self.spec.partitions,
            "subpartitions": self.spec.subpartitions,
            "retention_ms": self.spec.retention_ms,
            "key_codec": self.spec.key_codec,
            "value_codec": self.spec.value_codec,
            "schema_cql": self.schema_cql,
            "table_options": None if self.table_options is None else self.table_options.as_dict(),
            "estimated_partitions": None if self.size is None else self.size.partitions,
            "estimated_bytes": None if self.size is None else self.size.total_bytes,
            "max_partition_mib": self.max_partition_mib,
            "size_nodes_answered": self.nodes_answered,
            "size_nodes_total": self.nodes_total,
            "entries_per_partition": None if stats is None else list(stats.entries),
            "partition_skew": None if stats is None or stats.skew is None else round(stats.skew, 3),
            "last_batch_id": self.progress.last_batch_id,
            "last_batch_at": _iso(self.progress.last_batch_at),
            "max_event_time": _iso(self.progress.max_event_time),
            "source_topic": self.progress.source_topic,
            "writer": None if self.writer is None else self.writer.holder,
            "windowing": None if self.spec.windowing is None else self.spec.windowing.summary(),
        }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def list_stores(session, keyspace: str) -> list[StoreListing]:
    """Every store registered in `keyspace`, by name (none when nothing was registered yet)."""
    require_keyspace(session, keyspace)
    if not table_exists(session, keyspace, registry.REGISTRY_TABLE):
        return []
    return [StoreListing(spec, progress) for spec, progress in registry.list_stores(session, keyspace)]


def create_store(
    session,
    keyspace: str,
    name: str,
    store_type: StoreType | str = StoreType.PARTITIONED_KV,
    partitions: int = 1,
    options: TableOptions | Mapping[str, Any] | None = None,
    key_codec: str = "string",
    value_codec: str = "long",
    *,
    subpartitions: int = 1,
    retention_ms: int | None = None,
) -> StoreSpec:
    """Register the store and create its table with `options`. Idempotent for the same layout
    and codecs (an existing table keeps its options: change them with `alter_store`); another
    layout or codec is refused (StoreMismatchError). Global types always have 1 partition;
    `subpartitions` > 1 (partitioned-kv and partitioned-versioned) spreads each partition over that many Cassandra
    partitions (docs/stores.md, sub-partitions). `retention_ms`, when given, becomes the store's
    retention (statestore.store.retention.set_retention; None leaves the store's as it is)."""
    store_type = StoreType.parse(store_type) if isinstance(store_type, str) else store_type
    if not store_type.partitioned:
        partitions = 1
    table_options = options if isinstance(options, TableOptions) else TableOptions.parse(options)
    spec = StoreSpec(
        keyspace,
        name,
        store_type,
        partitions,
        key_codec=codecs.check_codec(key_codec).name,
        value_codec=codecs.check_codec(value_codec).name,
        subpartitions=subpartitions,
    )
    replace(spec, retention_ms=retention_ms)  # the retention is checked (OptionError) before anything is created
    existed = _has_registry(session, keyspace) and registry.find(session, keyspace, name) is not None
    registered = provision_store(session, spec, options=table_options, dead_letters=False)
    if existed:
        _log.info("store %s.%s exists already; its table options are unchanged", keyspace, name)
    if retention_ms is not None and retention_ms != registered.retention_ms:
        registered = set_retention(session, keyspace, name, retention_ms)
    return registered


def describe_store(session, keyspace: str, name: str, *, count_partitions: bool = True) -> StoreDescription:
    """Layout, schema, table options, Cassandra's size figures, progress and writer of a store.
    `count_partitions` adds exact entries per partition for partitioned types (a full scan)."""
    spec = registry.lookup(session, keyspace, name)
    table = _table_metadata(session, spec)
    stats = None
    if count_partitions and table is not None and spec.store_type.partitioned:
        stats = PartitionStats(_count_per_partition(session, spec))
    figures = cluster_figures(session, keyspace, spec.table)
    return StoreDescription(
        spec=spec,
        schema_cql=None if table is None else table.export_as_string(),
        table_options=None if table is None else _options_of(table.options),
        size=figures.size,
        max_partition_mib=figures.max_partition_mib,
        partition_stats=stats,
        progress=registry.progress(session, keyspace, name),
        writer=current_holder(session, keyspace, name),
        nodes_answered=figures.nodes_answered,
        nodes_total=figures.nodes_total,
    )


def alter_store(session, keyspace: str, name: str, changes: Mapping[str, Any]) -> TableOptions:
    """Change a store's table options (ttl / default_time_to_live, compaction,
    compaction_options, gc_grace_seconds, comment); returns the options now in force.
    Everything is validated before the ALTER TABLE is sent. A new compaction class starts
    from its own defaults unless `compaction_options` are given with it."""
    if not changes:
        raise OptionError("no table option to change: give e.g. ttl, compaction or gc_grace_seconds")
    spec = registry.lookup(session, keyspace, name)
    table = _require_table(session, spec)
    current = _options_of(table.options)
    if "compaction" in changes and "compaction_options" not in changes:
        current = current.with_compaction(changes["compaction"])
    wanted = current.updated(changes)
    if wanted.default_time_to_live:
        # Before the TTL can reach a row: a stream's apply cache then trusts no file that may
        # vouch for a row written under it, even if the TTL is gone again before its next batch
        # reads the table's options (the stream records the same mark once it sees a TTL).
        recorded = registry.progress(session, keyspace, name).ttl_expiring_until
        mark = registry.ttl_expiry_to_record(
            wanted.default_time_to_live, time.time(), None if recorded is None else recorded / 1000
        )
        if mark is not None:
            registry.record_ttl_expiry(session, spec, int(mark * 1000))
    session.execute(
        f"ALTER TABLE {spec.keyspace}.{spec.table} WITH {wanted.cql(_default_comment(spec))}",
        execution_profile=DDL_PROFILE,
    )
    _log.info("store %s.%s: table options now %s", keyspace, name, wanted.as_dict())
    return wanted


def truncate_store(
    session, keyspace: str, name: str, *, verb: str = "truncating", writer_stopped: bool = False
) -> StoreSpec:
    """Delete a store's entries, dead letters and recorded progress; keep its registration and
    layout. Refused while a writer holds the store's lease (it would go on from its old
    position); the stream then needs a new, empty checkpoint (its old one is refused: it would
    resume after input whose counts the reset deleted).
    `verb` names the action in that refusal (`statestore reset` says "resetting"). The CLI's
    reset, the Airflow hook and the admin DAG all come here.

    A writer whose lease lapsed while it was paused (SIGSTOP, a GC pause, a suspended VM) may
    wake up at any time, in the middle of a batch. So the reset fences it before deleting
    anything: it takes the store's lease itself (held while it works, under the holder name
    "statestore reset (host:pid:id)"; refused while anyone holds it), then the store's next
    epoch, so the paused writer's begin_batch / record_batch are refused (StoreFencedError) and
    it records nothing more; progress is cleared by an update conditional on that epoch. The
    reset is fenced by that epoch itself: each TRUNCATE comes right after a serial read that
    finds the epoch still the reset's (StoreFencedError, nothing deleted, once another reset took
    the store over), a move to a new table is a transaction conditional on it. No transaction can
    make the TRUNCATE itself conditional, so the reset's lease is durable (no TTL: lease.py): a
    reset paused between that read and its TRUNCATE, however long, still holds the store when it
    wakes up, and every stream is refused meanwhile (LeaseHeldError, naming the reset). The lease
    is released once the reset has finished (its progress cleared), or when it fails before
    deleting anything; a reset that fails (or is killed) after it began deleting keeps it, so no
    stream writes a half-reset store. A reset whose process is gone is taken over by a reset run
    again with `writer_stopped` (a transaction conditional on the holder it saw), which then
    does the whole reset; without `writer_stopped` that reset is refused too.

    Waiting does not bound such a writer: it may still send the rest of its batch's entries
    after the truncate, and checking the epoch on every entry write would cost a Paxos round
    each. Those late entries carry their batch's write timestamp, though, and every batch of
    the store writes with a timestamp at most the registry's `last_ts` / `pending_ts`, read
    serially once the new epoch is taken (no earlier writer can begin a batch after that). So
    for the layouts whose partition key is the store partition alone (partitioned-kv,
    partitioned-versioned), the reset also deletes each partition USING TIMESTAMP that floor:
    the tombstones shadow any late entry of an earlier writer, and the floor stays as `last_ts`
    so the next stream's batches write above it. The store is then provably empty of every
    earlier writer's entries (for as long as the tombstones live: gc_grace_seconds). Global,
    window and session stores have partition keys a reset cannot list (the key, or a time
    segment): their progress is fenced the same way, and while a batch is begun and not
    recorded the store moves to a new generation of its table instead of being truncated in
    place (`<store>_store_r1`, `_r2`, ...: created with the old table's options, registered,
    then the old table dropped), so the paused writer's late entries fail on a table that no
    longer exists and none of them reaches the store. Readers find the table in the registry;
    a stream that opens the store by name is given the new one. The caller may instead say the
    writer is stopped for good (`writer_stopped`: no earlier writer or reset of this store is
    still running, e.g. their processes are gone): truncated in place.
    A store whose table is gone while its registry records batches (which the stream refuses:
    statestore.store.provision) starts over the same way, in a new generation of its table with
    the default options: the reset is that refusal's way out.
    A reset that clears a batch begun and not recorded (without `writer_stopped`) records it as
    the store's fenced batch (fenced_after_reset): the drop refuses while it is recorded, as a
    store created again under the name would take that writer's late writes (drop_store).
    When no next name fits in 48 characters the reset is refused (WriterMayBeLiveError,
    nothing deleted). With no batch
    pending, a paused writer has nothing left to send: its next step is a begin_batch, which
    the new epoch refuses, so the table is truncated in place.
    """
    spec = registry.lookup(session, keyspace, name)
    # A registry made by an earlier release lacks fenced_batch, which clear_progress writes: added
    # now, before anything is deleted (else the reset would fail half done).
    registry.ensure_table(session, keyspace)
    lease = StoreLease(
        session,
        keyspace,
        name,
        RESET_CHECKPOINT,
        _RESET_LEASE_TTL_S,
        holder=f"statestore reset ({describe_self()})",
        durable=RESET_LEASE_DURABLE,
    )
    _take_reset_lease(session, spec, lease, verb, writer_stopped)
    deleting = finished = False
    try:
        lease.start_renewing()
        # A store whose table is gone (the stream refuses it: provision) starts over in a new one.
        lost = _table_metadata(session, spec) is None
        epoch = registry.take_epoch(session, spec)
        progress = registry.progress(session, keyspace, name)
        floor = max((t for t in (progress.last_ts, progress.pending_ts) if t is not None), default=None)
        shadowed = spec.store_type.partitioned and not spec.store_type.timed
        lease.check()
        refusal = _lost_refusal(spec, verb) if lost else None
        if not lost and progress.unfinished_batch is not None and not shadowed and not writer_stopped:
            refusal = _pending_refusal(spec, progress.unfinished_batch, verb)
        table = None if refusal is None else _next_free_table(session, spec, refusal)  # refused: nothing deleted
        deleting = True  # from here on, a failure may leave the store half reset: the lease is kept
        if table is not None:
            spec = _move_to_new_table(session, spec, table, epoch)
        else:
            _truncate(session, spec, spec.table, epoch)
        letters = deadletter_table(name)
        if table_exists(session, keyspace, letters):  # only stores fed by the stream have one
            _truncate(session, spec, letters, epoch)
            if floor is not None:  # a paused writer's late dead letters, as its entries: shadowed
                deadletters.delete_partitions_before(session, keyspace, name, _partitions_read(progress), floor)
        if floor is not None and shadowed:
            _shadow_partitions(session, spec, floor)
        registry.clear_progress(session, spec, epoch, floor, fenced_after_reset(progress, writer_stopped))
        finished = True
    finally:
        if finished or not deleting:
            lease.release()
        else:
            lease.stop_renewing()
            _log.error(
                "store %s.%s: the reset did not finish; its lease (%s) is kept, so no stream writes the half-reset "
                "store: run the reset again with --writer-stopped (hook: writer_stopped=True; admin DAG: param "
                "writer_stopped)",
                keyspace,
                name,
                lease.holder,
            )
    return spec


_RESET_LEASE_TTL_S = 30.0  # how often the reset renews its lease (a third of it), finding out if it was taken over
# The reset's lease has no TTL: it holds the store until the reset finishes (tests/simulation mirrors this).
RESET_LEASE_DURABLE = True


def fenced_after_reset(progress: StoreProgress, writer_stopped: bool) -> int | None:
    """Pure: the fenced batch a reset of a store with `progress` records (registry
    `fenced_batch`): the unfinished batch it clears (its writer may be paused mid-batch), else
    the one an earlier reset recorded (that writer may still wake); None with `writer_stopped`
    (the caller made sure every earlier writer is gone). A stream's later batches never clear
    it: a paused writer may wake after any number of them."""
    if writer_stopped:
        return None
    return progress.unfinished_batch if progress.unfinished_batch is not None else progress.fenced_batch


def _take_reset_lease(session, spec: StoreSpec, lease: StoreLease, verb: str, writer_stopped: bool) -> None:
    """The store's lease for a reset: refused while anyone holds it (LeaseHeldError), except an
    earlier reset's when `writer_stopped` says no earlier reset is still running: then taken
    over, conditional on the holder seen."""
    holder = current_holder(session, spec.keyspace, spec.name)
    if holder is not None and holder.checkpoint == RESET_CHECKPOINT and writer_stopped:
        lease.take_over(holder.holder)
        return
    _refuse_while_written(session, spec, verb)
    lease.acquire(same_checkpoint_wait_s=0)


def _partitions_read(progress: StoreProgress) -> list[tuple[str, int]]:
    """Pure: every (topic, Kafka partition) the store's recorded batches and its pending one read
    (a batch writes dead letters of those only; partitions are never removed from a topic)."""
    named = set()
    for text in (progress.offsets, progress.pending_offsets):
        offsets = KafkaOffsets.parse_stored(text)
        if offsets is not None:
            named.update((topic, int(partition)) for topic, parts in offsets.by_topic for partition, _ in parts)
    return sorted(named)


def _truncate(session, spec: StoreSpec, table: str, epoch: int) -> None:
    """TRUNCATE `table` of the store, unless a newer writer took the store since the reset took
    `epoch` (StoreFencedError, nothing deleted): the epoch is read serially right before, as no
    lightweight transaction can make a TRUNCATE conditional."""
    registry.check_epoch(session, spec, epoch, f"about to truncate table {spec.keyspace}.{table}")
    session.execute(f"TRUNCATE {spec.keyspace}.{table}", execution_profile=DDL_PROFILE)


def _pending_refusal(spec: StoreSpec, batch_id: int, verb: str) -> str:
    return (
        f"{verb} store '{spec.name}' ({spec.store_type.value}) refused: its batch {batch_id} was begun and "
        "never recorded, so its writer may be paused mid-batch (a lapsed lease does not prove it stopped) "
        f"and would write the rest of batch {batch_id} into the emptied store, where a {spec.store_type.value} "
        f"store cannot shadow it, and its table {spec.table} cannot move to a new generation (the next free "
        "name is over 48 characters). Nothing was deleted; "
        "the store is now fenced against that writer. Either make sure the writer is stopped for good (its "
        "process gone) and pass --writer-stopped (hook: writer_stopped=True; admin DAG: param "
        "writer_stopped), or restart its stream so it records the batch, then stop it and reset"
    )


def _lost_refusal(spec: StoreSpec, verb: str) -> str:
    return (
        f"{verb} store '{spec.name}' ({spec.store_type.value}) refused: its table {spec.table} is gone, and the store "
        "cannot start over in a new generation of it (the next free name is over 48 characters). Nothing was "
        f"deleted. Drop the store (state_store_admin's drop, or the hook's drop_store) and create it again"
    )


def _next_free_table(session, spec: StoreSpec, refusal: str) -> str:
    """The next free generation of the store's table (names.next_generation_table; a
    re-layout's kept table or an interrupted reset's empty one is skipped, never adopted);
    WriterMayBeLiveError (`refusal`) when no name fits."""
    table = next_generation_table(spec.table)
    while table is not None and table_exists(session, spec.keyspace, table):
        table = next_generation_table(table)
    if table is None:
        raise WriterMayBeLiveError(refusal)
    return table


def _move_to_new_table(session, spec: StoreSpec, table: str, epoch: int) -> StoreSpec:
    """Move the store to `table` (_next_free_table), with the old table's options, and drop
    the old one (see truncate_store). The registry points at the new table before the old one
    goes, so a reset interrupted in between leaves a store whose table exists."""
    metadata = _table_metadata(session, spec)
    options = None if metadata is None else _options_of(metadata.options)  # a lost table's: the defaults
    session.execute(create_cql_for(replace(spec, table_name=table), options), execution_profile=DDL_PROFILE)
    moved = registry.move_table(session, spec, table, epoch)
    session.execute(f"DROP TABLE IF EXISTS {spec.keyspace}.{spec.table}", execution_profile=DDL_PROFILE)
    _log.info(
        "store %s.%s moved from table %s to %s (a batch was in flight)", spec.keyspace, spec.name, spec.table, table
    )
    return moved


def _shadow_partitions(session, spec: StoreSpec, timestamp: int) -> None:
    """Delete every Cassandra partition of the store (each sub-partition of each store
    partition) USING TIMESTAMP `timestamp` (see truncate_store)."""
    where, keys = _cassandra_partitions(spec)
    delete = prepare(session, f"DELETE FROM {spec.keyspace}.{spec.table} USING TIMESTAMP ? WHERE {where}")
    delete.is_idempotent = True
    execute_concurrent(session, [(delete, (timestamp, *k)) for k in keys], concurrency=8, raise_on_first_error=True)


def _cassandra_partitions(spec: StoreSpec) -> tuple[str, list[tuple[int, ...]]]:
    """The partition-key condition of a partitioned-kv or partitioned-versioned table, and the
    key of each of its Cassandra partitions, store partition first."""
    if spec.subpartitions == 1:
        return "partition = ?", [(p,) for p in range(spec.partitions)]
    keys = [(p, s) for p in range(spec.partitions) for s in range(spec.subpartitions)]
    return "partition = ? AND subpartition = ?", keys


def drop_store(session, keyspace: str, name: str, confirm: str | None, *, writer_stopped: bool = False) -> StoreSpec:
    """Drop the store's table (with a re-layout's old ones: tables_to_drop) and dead-letter
    table and forget the store. Only when `confirm` is the store's name, and never while a
    writer holds its lease. Safe to run again after a
    partial failure (tables are dropped before the registry row goes).

    A writer whose lease lapsed while it was paused may wake up after the drop. Its registry
    updates are refused (the row is gone, and a store created again under the name starts
    other epochs: registry.first_epoch), but the entries of a batch it began are not
    conditional, and would land in the table of a store created again under the same name. So
    while a batch is begun and not recorded, or a reset fenced one such (its writer may still be
    paused: registry `fenced_batch`, whose late writes no tombstone or epoch of the store
    created again shadows), the drop is refused (WriterMayBeLiveError, nothing dropped), unless
    the caller says that writer is stopped for good (`writer_stopped`).
    A task attempt of a recorded batch may outlive it too (speculative, or cut off from its
    driver): no refusal can see it. Its writes fail instead: the drop records the tables it
    drops (book.dropped) and a store created again under the name starts in a table name never
    used before (`<store>_store_r<k>`)."""
    validate_store_name(name)
    if confirm != name:
        raise ConfirmationRequiredError(
            f"dropping store '{name}' deletes its table and every entry for good: confirm by passing the "
            f"store's name ('{name}') as the confirmation"
        )
    spec = registry.lookup(session, keyspace, name)
    _refuse_while_written(session, spec, "dropping")
    progress = registry.progress(session, keyspace, name)
    refusal = drop_refusal(name, progress.unfinished_batch, writer_stopped, fenced=progress.fenced_batch)
    if refusal is not None:
        raise WriterMayBeLiveError(refusal)
    existing = session.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (spec.keyspace,))
    tables = tables_to_drop(name, spec.table, [row.table_name for row in existing])
    dropped.record_drop(session, keyspace, name, tables)  # a store created again starts past them
    for table in tables:
        session.execute(f"DROP TABLE IF EXISTS {spec.keyspace}.{table}", execution_profile=DDL_PROFILE)
    session.execute(f"DROP TABLE IF EXISTS {spec.keyspace}.{deadletter_table(name)}", execution_profile=DDL_PROFILE)
    registry.unregister(session, keyspace, name)
    _log.info("store %s.%s dropped (a stream's old checkpoint for it is now stale: delete it)", keyspace, name)
    return spec


def tables_to_drop(name: str, table: str, existing: list[str]) -> list[str]:
    """Pure: the tables a drop of store `name`, which uses `table`, drops among the keyspace's
    `existing` ones: that table and every other of the store's own names (`<store>_store`,
    `<store>_store_r<k>`: a re-layout's old tables, a reset's earlier generations). A table
    left under the store's first name would be the table of a store created again under the
    name (CREATE TABLE IF NOT EXISTS), with every entry of the dropped one."""
    own = store_table(name)
    leftovers = [t for t in existing if t == own or (t.startswith(f"{own}_r") and t[len(own) + 2 :].isdigit())]
    return [table, *sorted(set(leftovers) - {table})]


def drop_refusal(name: str, pending: int | None, writer_stopped: bool, *, fenced: int | None = None) -> str | None:
    """Pure: why dropping store `name` is refused while its batch `pending` (None: none) was
    begun and never recorded, or while its batch `fenced` was so begun by a writer a reset or a
    later run took the store from (registry `fenced_batch`; None: none), unless the caller says
    its writer is stopped for good; None: it may be dropped (drop_store's docstring)."""
    if writer_stopped or (pending is None and fenced is None):
        return None
    if pending is None:
        return (
            f"dropping store '{name}' refused: its batch {fenced} was begun by a writer that never recorded it (a "
            "reset cleared it, or a later run took the store over and finished it), so that writer may still be "
            "paused mid-batch (a lapsed lease does not prove it stopped): it is fenced off the store's progress, "
            "but its late entries and dead letters would land in a store created again under this name. Nothing "
            "was dropped. Make sure that writer is stopped for good (its process "
            "gone), then drop with writer_stopped=True (the hook's drop_store; admin DAG: param writer_stopped)"
        )
    return (
        f"dropping store '{name}' refused: its batch {pending} was begun and never recorded, so its writer may "
        "be paused mid-batch (a lapsed lease does not prove it stopped) and would write the rest of the batch "
        "into a store created again under this name. Nothing was dropped. Make sure the writer is stopped for "
        "good (its process gone) and pass writer_stopped=True (admin DAG: param writer_stopped), or restart "
        "its stream so it records the batch, then stop it and drop"
    )


def top_entries(session, keyspace: str, name: str, limit: int = 10) -> list[tuple[Any, int]]:
    """The `limit` entries of store `name` with the highest numeric values (see top_of)."""
    return top_of(open_store(session, keyspace, name), limit)


def top_of(store, limit: int = 10) -> list[tuple[Any, int]]:
    """The `limit` entries of an open store with the highest numeric values, ties by key, for
    stores of long or int values. Reads the whole store once, keeping only a bounded heap."""
    if limit < 1:
        raise OptionError(f"limit must be at least 1, got {limit}")
    if store.value_codec.name not in ("long", "int"):
        raise UnsupportedOperationError(
            f"top entries rank numeric values; store '{store.name}' holds {store.value_codec.name} values: "
            "list them in key order instead (all)"
        )
    return heapq.nsmallest(limit, store.all(), key=lambda kv: (-kv[1], kv[0]))


@dataclass(frozen=True)
class WindowTop:
    """One window of a window store with its highest counts: [start_ms, end_ms) and (key, value)s."""

    start_ms: int
    end_ms: int
    top: list[tuple[Any, int]]


def latest_windows(session, keyspace: str, name: str, windows: int = 3, limit: int = 10) -> list[WindowTop]:
    """The `windows` newest windows of window store `name` (newest first, none after its stream
    time: WindowStore.latest), each with its `limit` highest counts, ties by key. A store of
    measures (an aggregate store) has no one count to rank by: OptionError, naming `top --by`."""
    if windows < 1 or limit < 1:
        raise OptionError(f"windows and limit must be at least 1, got {windows} and {limit}")
    store = open_window_store(session, keyspace, name)
    if store.value_codec.name.startswith(AGGREGATE_FORMAT_PREFIX):
        raise OptionError(
            f"store '{name}' keeps measures ({store.value_codec.name}), not counts: rank its windows by one "
            f"of them (`statestore top {name} --by MEASURE`)"
        )
    size = store.windowing.size_ms
    return [
        WindowTop(start, start + size, heapq.nsmallest(limit, [(w.key, w.value) for w in found], key=_by_count))
        for start, found in store.latest(windows)
    ]


def _by_count(pair: tuple[Any, int]) -> tuple[int, Any]:
    return -pair[1], pair[0]


def latest_sessions(session, keyspace: str, name: str, limit: int = 10) -> list:
    """The `limit` sessions of session store `name` that ended last (ties: more events first; an
    aggregate store's sessions, whose values are their measures, tie by nothing more). Reads the
    whole store once, keeping only a bounded heap."""
    if limit < 1:
        raise OptionError(f"limit must be at least 1, got {limit}")
    sessions = open_session_store(session, keyspace, name).all()
    return heapq.nlargest(limit, sessions, key=lambda s: (s.end_ms, s.value if isinstance(s.value, int) else 0))


# -- helpers ---------------------------------------------------------------------------------


def _has_registry(session, keyspace: str) -> bool:
    return table_exists(session, validate_keyspace(keyspace), registry.REGISTRY_TABLE)


def _table_metadata(session, spec: StoreSpec):
    keyspace = session.cluster.metadata.keyspaces.get(spec.keyspace)
    if keyspace is None or spec.table not in keyspace.tables:
        # The driver's schema cache may lag a table made by another client: ask once more.
        session.cluster.refresh_table_metadata(spec.keyspace, spec.table)
        keyspace = session.cluster.metadata.keyspaces.get(spec.keyspace)
    return None if keyspace is None else keyspace.tables.get(spec.table)


def _require_table(session, spec: StoreSpec):
    table = _table_metadata(session, spec)
    if table is None:
        raise StoreNotFoundError(
            f"store '{spec.name}' is registered but its table {spec.keyspace}.{spec.table} does not exist: "
            "create the store again (create_store) or drop it"
        )
    return table


def _refuse_while_written(session, spec: StoreSpec, action: str) -> None:
    holder = current_holder(session, spec.keyspace, spec.name)
    if holder is None:
        return
    if holder.checkpoint == RESET_CHECKPOINT:
        raise LeaseHeldError(
            f"{action} store '{spec.name}' refused: "
            + held_message(spec.name, holder.holder, holder.checkpoint, holder.acquired_at)
        )
    raise LeaseHeldError(
        f"store '{spec.name}' is being written by {holder.holder} (checkpoint {holder.checkpoint}); stop that "
        f"query before {action} the store (a crashed writer's lease expires within its TTL, 30 s by default)"
    )


def _default_comment(spec: StoreSpec) -> str:
    return f"statestore {spec.store_type.value} store {spec.name}"


def _options_of(raw: Mapping[str, Any]) -> TableOptions:
    """The TableOptions a table has now, from the driver's schema metadata."""
    compaction = dict(raw.get("compaction") or {})
    compaction_class = str(compaction.pop("class", "")).removeprefix(_COMPACTION_PACKAGE)
    comment = raw.get("comment") or None
    try:
        TableOptions(comment=comment)
    except OptionError:
        comment = None  # set outside this library with characters we do not write back
    return TableOptions(
        compaction=compaction_class,
        compaction_options=compaction,
        default_time_to_live=int(raw.get("default_time_to_live") or 0),
        gc_grace_seconds=raw.get("gc_grace_seconds"),
        comment=comment,
    )


def _count_per_partition(session, spec: StoreSpec) -> tuple[int, ...]:
    # `partition` leads the partition key of both partitioned layouts (partitioned-kv and
    # partitioned-versioned), so one statement serves both; a store partition's sub-partitions
    # are summed.
    where, keys = _cassandra_partitions(spec)
    select = prepare(session, f"SELECT COUNT(*) FROM {spec.keyspace}.{spec.table} WHERE {where}")
    select.is_idempotent = True
    results = execute_concurrent(session, [(select, k) for k in keys], concurrency=8, raise_on_first_error=True)
    counts = [0] * spec.partitions
    for key, result in zip(keys, results, strict=True):
        counts[key[0]] += result.result_or_exc.one()[0]
    return tuple(counts)
