"""Re-layout: copy a partitioned store into a new table with another number of sub-partitions.

A store's sub-partitions fix where each key lives, so changing them means a new table: the
store is copied into `<store>_store_r<k>` laid out with the new count, the copy is verified
(exact counts of both tables, and an order-free checksum of every row, read again from both
tables after the copy, equal to the one of what was copied), and only then the registry is
pointed at the new table (a lightweight transaction conditional on the old one). The old
table is kept, untouched, as the way back until the operator confirms with `drop_old_table`
(or `statestore relayout STORE --drop-table TABLE`).

The stream must be stopped: the re-layout is refused while anyone holds the store's lease, and
holds the lease itself (holder "statestore relayout (...)") for the whole copy, so no stream
can start mid-copy. It also takes the store's next epoch, so a paused writer that wakes up
can record nothing, and refuses a store whose last batch was begun and never recorded (its
writer may still send entries into the old table; restart the stream to finish it first).
The swap is conditional on that epoch too: a re-layout paused after its last lease check for
longer than its lease, while a stream took the store over, is refused when it wakes up
(StoreFencedError) and the store keeps its table. A failed re-layout settles what to do with
its new table on a serial read of the registry (settle_failed_relayout): a swap that timed
out but applied is the re-layout done; the table is dropped only while the store does not use
it and nobody took the store since this re-layout's epoch, and kept (the error names it)
otherwise.
The copied rows are written at the registry's `last_ts`, the write timestamp of the last
batch applied, so every later batch (written above it) wins over them as before.

What is copied is each type's stored rows, as they are: a partitioned-kv store's entries
(key, value, batch, time), a partitioned-versioned store's every version row (the whole history
of every key: validity, value or tombstone, batch and time). The table modules own the CQL of
reading, writing and counting those rows (`_Rows` names them); this module only orchestrates.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import count, islice

from statestore.conn.cassandra import DDL_PROFILE
from statestore.core.errors import (
    ConfirmationRequiredError,
    OptionError,
    StateStoreError,
    StoreChangedError,
    UnsupportedOperationError,
    WriterMayBeLiveError,
)
from statestore.core.model import Entry, StoreSpec, StoreType, Version
from statestore.core.names import store_table, table_generation, validate_store_name, validate_table_name
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.book.lease import StoreLease, describe_self
from statestore.store.provision import table_exists
from statestore.store.tables import KeyValueTable, table_for
from statestore.store.tables.partitioned_versioned import PartitionedVersionedTable

_log = logging.getLogger(__name__)
_LEASE_TTL_S = 30.0
_CHUNK = 20_000  # rows read before they are written (bounded memory)
_MASK = 2**64 - 1
_RELAID = (StoreType.PARTITIONED_KV, StoreType.PARTITIONED_VERSIONED)


@dataclass(frozen=True)
class RelayoutResult:
    """What a re-layout did: the store, both tables and layouts, and what was verified.
    `entries` counts the rows copied: entries, or a versioned store's version rows (`unit`)."""

    store: str
    old_table: str
    new_table: str
    old_subpartitions: int
    new_subpartitions: int
    entries: int
    checksum: str
    seconds: float
    unit: str = "entries"

    def as_dict(self) -> dict:
        return {**vars(self), "old_table_kept": True}


def relayout_store(session, keyspace: str, name: str, subpartitions: int, *, concurrency: int = 64) -> RelayoutResult:
    """Copy store `name` into a new table of `subpartitions` sub-partitions per partition,
    verify, swap the registry to it and keep the old table (see the module doc)."""
    _check_relaid(registry.lookup(session, keyspace, validate_store_name(name)), subpartitions)
    began = time.monotonic()
    lease = StoreLease(
        session, keyspace, name, "(none: a relayout)", _LEASE_TTL_S, f"statestore relayout ({describe_self()})"
    )
    lease.acquire(same_checkpoint_wait_s=0)  # LeaseHeldError while a stream writes the store
    lease.start_renewing()
    try:
        # A paused writer that wakes up records nothing more, and neither does this re-layout once
        # its own lease lapsed and a newer writer took the store: the swap is conditional on it.
        epoch = registry.take_epoch(session, registry.lookup(session, keyspace, name))
        # The store as of that epoch: any later change of its table needs a newer one.
        spec = _check_relaid(registry.lookup(session, keyspace, name), subpartitions)
        progress = registry.progress(session, keyspace, name)
        if progress.unfinished_batch is not None:
            raise WriterMayBeLiveError(
                f"re-layout of store '{name}' refused: its batch {progress.unfinished_batch} was begun and never "
                "recorded, so its writer may still send entries to the old table. Restart the stream so it "
                "finishes the batch, stop it, then re-lay out. Nothing was copied."
            )
        target = replace(spec, table_name=next_table(session, spec), subpartitions=subpartitions)
        options = admin.describe_store(session, keyspace, name, count_partitions=False).table_options
        session.execute(table_for(target).create_cql(options), execution_profile=DDL_PROFILE)
        swap_sent = False
        try:
            copied, checksum = _copy_and_verify(session, spec, target, progress.last_ts, concurrency, lease)
            lease.check()
            swap_sent = True
            registry.swap_table(session, spec, target.table, subpartitions, epoch)
        except BaseException as exc:
            if settle_moved_table(session, target, epoch, swap_sent, exc) != SWAPPED:
                raise
    finally:
        lease.release()
    result = RelayoutResult(
        name,
        spec.table,
        target.table,
        spec.subpartitions,
        subpartitions,
        copied,
        checksum,
        round(time.monotonic() - began, 2),
        _rows_of(table_for(spec)).unit,
    )
    _log.info(
        "store %s.%s re-laid out: %d %s copied from %s (%d sub-partitions) to %s (%d); old table kept",
        keyspace, name, copied, result.unit, spec.table, spec.subpartitions, target.table, subpartitions,
    )  # fmt: skip
    return result


def _check_relaid(spec: StoreSpec, subpartitions: int) -> StoreSpec:
    """`spec`, if it can be re-laid out into `subpartitions`: UnsupportedOperationError or
    OptionError when not."""
    if spec.store_type not in _RELAID:
        raise UnsupportedOperationError(
            f"store '{spec.name}' is {spec.store_type.value}: only partitioned-kv and partitioned-versioned stores "
            "are re-laid out (a global store has a partition per key already; window and session stores are "
            "bounded by their time segments)"
        )
    if subpartitions == spec.subpartitions:
        raise OptionError(f"store '{spec.name}' has {subpartitions} sub-partition(s) already: nothing to re-lay out")
    return spec


# What a failed re-layout does with its new table (settle_failed_relayout).
SWAPPED, DROP, KEEP = "swapped", "drop", "keep"


def settle_failed_relayout(
    target_table: str, epoch: int, swap_sent: bool, registered: tuple[str, int | None] | None
) -> str:
    """Pure: what a re-layout of `epoch` that failed does with `target_table`, its new table,
    given the store's (table, epoch) `registered` in the registry, read serially after the
    failure (None: that read failed too). SWAPPED: the swap was sent and applied (it timed out,
    say), so the re-layout is done. DROP: the store does not use the table and nobody took the
    store since this re-layout's epoch, so the table is only this re-layout's (a swap it sent
    has not applied and, once a serial read has seen that, never will). KEEP in every other
    case: the store uses it, or another writer or action took the store meanwhile and may use
    that name by now, or the registry could not be read. A plain read at a quorum could miss a
    swap whose transaction was accepted but not yet committed; dropping the table it installs
    would lose the store."""
    if registered is None:
        return KEEP
    table, current = registered
    if current != epoch:
        return KEEP
    if table == target_table:
        return SWAPPED if swap_sent else KEEP
    return DROP


def settle_moved_table(
    session, target: StoreSpec, epoch: int, swap_sent: bool, failure: BaseException, what: str = "re-layout"
) -> str:
    """Settle a failed move to a new table (settle_failed_relayout) and act on it: drop the new
    table, or keep it and say so in the error. `what` names the move in what it logs and says
    (a re-layout, or statestore.store.migration's conversion to panes)."""
    try:
        registered = registry.registered_table(session, target.keyspace, target.name)
    except Exception as exc:  # noqa: BLE001 - then nothing is dropped (KEEP), and the error says so
        _log.warning("store %s: the registry could not be read after a failed %s (%s)", target.name, what, exc)
        registered = None
    action = settle_failed_relayout(target.table, epoch, swap_sent, registered)
    if action == DROP:
        session.execute(f"DROP TABLE IF EXISTS {target.keyspace}.{target.table}", execution_profile=DDL_PROFILE)
    elif action == SWAPPED:
        _log.warning(
            "store %s.%s: the switch to table %s failed (%s), but a serial read shows it applied: %s done",
            target.keyspace, target.name, target.table, failure, what,
        )  # fmt: skip
    elif not (registered is not None and registered[0] == target.table):
        kept = (
            f"The new table {target.keyspace}.{target.table} was kept, not dropped: the store was taken over "
            f"since this {what} began (or the registry could not be read), and may use that name by now. Once "
            f"`statestore describe {target.name}` shows another table, drop it: `statestore relayout {target.name} "
            f"--drop-table {target.table} --yes`"
        )
        _log.error("store %s: %s", target.name, kept)
        if isinstance(failure, StateStoreError):
            raise type(failure)(f"{failure}. {kept}") from failure
    return action


def _copy_and_verify(
    session, source: StoreSpec, target: StoreSpec, write_ts: int | None, concurrency: int, lease: StoreLease
) -> tuple[int, str]:
    """Copy every row of `source`'s table into `target`'s; (rows, checksum) once both
    tables count the same and the target reads back with the source's checksum."""
    old, new = _rows_of(table_for(source)), _rows_of(table_for(target))
    copied, digest = 0, 0
    rows = old.read(session)
    while chunk := list(islice(rows, _CHUNK)):
        lease.check()
        new.write(session, chunk, concurrency, write_ts)
        copied += len(chunk)
        digest = (digest + _checksum(chunk, old.fingerprint)) & _MASK
    # Both tables read again: a row written to the source once copied, or a lost write,
    # shows as a count or a checksum that differs.
    counts = {"copied": copied, source.table: old.count(session), target.table: new.count(session)}
    sums = {"copied": digest, source.table: _checksum(old.read(session), old.fingerprint)}
    sums[target.table] = _checksum(new.read(session), new.fingerprint)
    if len(set(counts.values())) != 1 or len(set(sums.values())) != 1:
        raise StoreChangedError(
            f"re-layout of store '{source.name}' not verified: {old.unit} {counts}, checksums "
            f"{ {table: f'{value:016x}' for table, value in sums.items()} }. The store was written during the copy "
            "(by something that holds no lease) or a write was lost; the new table was dropped and the store "
            "still uses its old table. Stop every writer and run it again."
        )
    return copied, f"{digest:016x}"


@dataclass(frozen=True)
class _Rows:
    """What a re-layout copies of one table and how, each step its table module's: `read`
    every stored row, `write` a chunk of them (at a write timestamp), `count` them inside
    Cassandra, and the bytes that `fingerprint` one row for the checksum."""

    unit: str
    read: Callable[[object], Iterator]
    write: Callable[[object, list, int, int | None], None]
    count: Callable[[object], int]
    fingerprint: Callable[[object], bytes]


def _rows_of(table: KeyValueTable) -> _Rows:
    """A partitioned-versioned table's version rows (every one, old history and tombstone
    versions too), or a partitioned-kv table's entries."""
    if isinstance(table, PartitionedVersionedTable):  # sub-partitioned too
        return _Rows("versions", table.scan_versions, table.write_versions, table.count_versions, _version_bytes)
    return _Rows("entries", table.scan_unordered, table.write_entries, table.count, _entry_bytes)


def _entry_bytes(entry: Entry) -> bytes:
    """An entry's fingerprint: key, value, batch and time."""
    return b"\x00".join((entry.key, entry.value, str(entry.batch_id).encode(), str(entry.time_ms).encode()))


def _version_bytes(version: Version) -> bytes:
    """A version row's fingerprint: key, validity, value (a tombstone told from an empty
    value), batch and time."""
    value = b"-" if version.value is None else b"+" + version.value
    numbers = (version.valid_from, version.valid_to, version.batch_id, version.time_ms)
    return b"\x00".join((version.key, *(str(n).encode() for n in numbers), value))


def _checksum(rows: Iterable, fingerprint: Callable[[object], bytes]) -> int:
    """An order-free 64-bit checksum of rows: the sum of the hash of each one's fingerprint."""
    total = 0
    for row in rows:
        total += int.from_bytes(hashlib.blake2b(fingerprint(row), digest_size=8).digest(), "big")
    return total & _MASK


def next_table(session, spec: StoreSpec) -> str:
    """The first `<store>_store_r<k>` after the store's own table that does not exist yet: a
    generation is never used twice (an earlier table dropped by hand may still be written by a
    task attempt that resolved it; a store created again starts past its dropped ones: book.dropped)."""
    base, generation = table_generation(spec.table)
    for index in count(generation + 1 if base == store_table(spec.name) else 1):
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
