"""Re-layout: copy a partitioned-kv store into a new table with another number of sub-partitions.

A store's sub-partitions fix where each key lives, so changing them means a new table: the
store is copied into `<store>_store_r<k>` laid out with the new count, the copy is verified
(exact counts of both tables, and an order-free checksum of every entry, read again from both
tables after the copy, equal to the one of what was copied), and only then the registry is
pointed at the new table (a lightweight transaction conditional on the old one). The old
table is kept, untouched, as the way back until the operator confirms with `drop_old_table`
(or `statestore relayout STORE --drop-table TABLE`).

The stream must be stopped: the re-layout is refused while anyone holds the store's lease, and
holds the lease itself (holder "statestore relayout (...)") for the whole copy, so no stream
can start mid-copy. It also takes the store's next epoch, so a paused writer that wakes up
can record nothing, and refuses a store whose last batch was begun and never recorded (its
writer may still send entries into the old table; restart the stream to finish it first).
The copied entries are written at the registry's `last_ts`, the write timestamp of the last
batch applied, so every later batch (written above it) wins over them as before.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from itertools import count, islice

from statestore.conn.cassandra import DDL_PROFILE
from statestore.core.errors import (
    ConfirmationRequiredError,
    OptionError,
    StoreChangedError,
    UnsupportedOperationError,
    WriterMayBeLiveError,
)
from statestore.core.model import Entry, StoreSpec, StoreType
from statestore.core.names import store_table, validate_store_name, validate_table_name
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.book.lease import StoreLease, describe_self
from statestore.store.provision import table_exists
from statestore.store.tables import table_for

_log = logging.getLogger(__name__)
_LEASE_TTL_S = 30.0
_CHUNK = 20_000  # entries read before they are written (bounded memory)
_MASK = 2**64 - 1


@dataclass(frozen=True)
class RelayoutResult:
    """What a re-layout did: the store, both tables and layouts, and what was verified."""

    store: str
    old_table: str
    new_table: str
    old_subpartitions: int
    new_subpartitions: int
    entries: int
    checksum: str
    seconds: float

    def as_dict(self) -> dict:
        return {**vars(self), "old_table_kept": True}


def relayout_store(session, keyspace: str, name: str, subpartitions: int, *, concurrency: int = 64) -> RelayoutResult:
    """Copy store `name` into a new table of `subpartitions` sub-partitions per partition,
    verify, swap the registry to it and keep the old table (see the module doc)."""
    spec = registry.lookup(session, keyspace, validate_store_name(name))
    if spec.store_type is not StoreType.PARTITIONED_KV:
        raise UnsupportedOperationError(
            f"store '{name}' is {spec.store_type.value}: only partitioned-kv stores are re-laid out (a versioned "
            "store's histories are not copied; create a partitioned-versioned store with --subpartitions instead)"
        )
    if subpartitions == spec.subpartitions:
        raise OptionError(f"store '{name}' has {subpartitions} sub-partition(s) already: nothing to re-lay out")
    target = replace(spec, table_name=_next_table(session, spec), subpartitions=subpartitions)
    options = admin.describe_store(session, keyspace, name, count_partitions=False).table_options
    began = time.monotonic()
    lease = StoreLease(
        session, keyspace, name, "(none: a relayout)", _LEASE_TTL_S, f"statestore relayout ({describe_self()})"
    )
    lease.acquire(same_checkpoint_wait_s=0)  # LeaseHeldError while a stream writes the store
    lease.start_renewing()
    try:
        registry.take_epoch(session, spec)  # a paused writer that wakes up records nothing more
        progress = registry.progress(session, keyspace, name)
        if progress.unfinished_batch is not None:
            raise WriterMayBeLiveError(
                f"re-layout of store '{name}' refused: its batch {progress.unfinished_batch} was begun and never "
                "recorded, so its writer may still send entries to the old table. Restart the stream so it "
                "finishes the batch, stop it, then re-lay out. Nothing was copied."
            )
        session.execute(table_for(target).create_cql(options), execution_profile=DDL_PROFILE)
        try:
            entries, checksum = _copy_and_verify(session, spec, target, progress.last_ts, concurrency, lease)
            lease.check()
            registry.swap_table(session, spec, target.table, subpartitions)
        except BaseException:
            # A swap that timed out may still have been applied: never drop the table the store uses.
            if registry.lookup(session, keyspace, name).table != target.table:
                session.execute(f"DROP TABLE IF EXISTS {target.keyspace}.{target.table}", execution_profile=DDL_PROFILE)
            raise
    finally:
        lease.release()
    result = RelayoutResult(
        name,
        spec.table,
        target.table,
        spec.subpartitions,
        subpartitions,
        entries,
        checksum,
        round(time.monotonic() - began, 2),
    )
    _log.info(
        "store %s.%s re-laid out: %d entries copied from %s (%d sub-partitions) to %s (%d); old table kept",
        keyspace, name, entries, spec.table, spec.subpartitions, target.table, subpartitions,
    )  # fmt: skip
    return result


def _copy_and_verify(
    session, source: StoreSpec, target: StoreSpec, write_ts: int | None, concurrency: int, lease: StoreLease
) -> tuple[int, str]:
    """Copy every entry of `source`'s table into `target`'s; (entries, checksum) once both
    tables count the same and the target reads back with the source's checksum."""
    old, new = table_for(source), table_for(target)
    copied, digest = 0, 0
    entries = old.scan_unordered(session)
    while chunk := list(islice(entries, _CHUNK)):
        lease.check()
        new.write_entries(session, chunk, concurrency, write_ts)
        copied += len(chunk)
        digest = (digest + _checksum(chunk)) & _MASK
    # Both tables read again: an entry written to the source once copied, or a lost write,
    # shows as a count or a checksum that differs.
    counts = {"copied": copied, source.table: old.count(session), target.table: new.count(session)}
    sums = {"copied": digest, source.table: _checksum(old.scan_unordered(session))}
    sums[target.table] = _checksum(new.scan_unordered(session))
    if len(set(counts.values())) != 1 or len(set(sums.values())) != 1:
        raise StoreChangedError(
            f"re-layout of store '{source.name}' not verified: entries {counts}, checksums "
            f"{ {table: f'{value:016x}' for table, value in sums.items()} }. The store was written during the copy "
            "(by something that holds no lease) or a write was lost; the new table was dropped and the store "
            "still uses its old table. Stop every writer and run it again."
        )
    return copied, f"{digest:016x}"


def _checksum(entries: Iterable[Entry]) -> int:
    """An order-free 64-bit checksum of entries: the sum of each one's hash (key, value, batch, time)."""
    total = 0
    for entry in entries:
        text = b"\x00".join((entry.key, entry.value, str(entry.batch_id).encode(), str(entry.time_ms).encode()))
        total += int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")
    return total & _MASK


def _next_table(session, spec: StoreSpec) -> str:
    """The first `<store>_store_r<k>` that does not exist yet."""
    for index in count(1):
        name = validate_table_name(f"{store_table(spec.name)}_r{index}")
        if name != spec.table and not table_exists(session, spec.keyspace, name):
            return name
    raise AssertionError("unreachable: count() never ends")


def drop_old_table(session, keyspace: str, name: str, table: str, confirm: str | None) -> str:
    """Drop a table a re-layout left behind (the store's earlier table): only one of the
    store's own table names, never the one it uses now, and only when `confirm` is the
    store's name. Returns the dropped table's qualified name."""
    spec = registry.lookup(session, keyspace, validate_store_name(name))
    validate_table_name(table)
    own = store_table(spec.name)
    if table != own and not (table.startswith(f"{own}_r") and table[len(own) + 2 :].isdigit()):
        raise OptionError(f"table {table} is not one of store '{name}''s tables ({own} or {own}_r<k>)")
    if table == spec.table:
        raise OptionError(f"table {table} is the table store '{name}' uses now: drop the store instead")
    if confirm != name:
        raise ConfirmationRequiredError(
            f"dropping table {keyspace}.{table} deletes the store's copy from before its re-layout for good (the "
            f"way back): confirm by passing the store's name ('{name}') as the confirmation"
        )
    session.execute(f"DROP TABLE IF EXISTS {keyspace}.{table}", execution_profile=DDL_PROFILE)
    return f"{keyspace}.{table}"
