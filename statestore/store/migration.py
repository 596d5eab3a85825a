"""What `statestore migrate` does to a store: its bookkeeping, then its window layout.

First the schema (statestore.store.book.schema: the columns an earlier release's tables lack, the
version recorded last). Then a hopping window store the word count's stream writes, made before
panes existed (its windowing's `panes` false: a row per key and window, statestore.core.windows),
is turned into panes (`to_panes`): the stream then writes one row per key and pane instead of
size/hop rows per key and window, and every reader returns what it returned before.

The conversion is a re-layout (statestore.store.relayout) of a window store: with the store's
lease held (refused while a stream writes it) and its next epoch taken, it refuses a store whose
last batch was begun and never recorded, creates the paned table in the store's next table
generation (`<store>_store_r<k>`, the old table's options), copies each window row (key, start
s, value, batch, time) as the pane row (key, pane s, from s, same value, batch and time), which
counts in window s only (WindowSpec.windows_of_row), so each window reads back as it was for any
value, and with the time its row had left to live (its TTL, or none: the new table's default TTL,
the old one's, would otherwise give every copied row a whole TTL from the copy on); verifies
that every window read back through the new table equals the old row (and no other window
appears); and only then points the registry at the new table with the paned
windowing, in one lightweight transaction conditional on the old table and that epoch
(registry.swap_windowing). The rows are written at the registry's `last_ts`, so every later batch
wins over them. The old table is kept, untouched, as the way back, until the operator drops it
(`statestore relayout STORE --drop-table TABLE --yes`). A failed conversion settles its new
table as a re-layout does (relayout.settle_failed_relayout): dropped while the store does not
use it and nobody took the store since, kept otherwise; running it again starts over.

Only count stores become panes (long values, a window the sum of its panes): a hopping store of
aggregates is refused before anything is written, and `migrate` leaves it, and a store written
only by the library's put() (no topic, no batch: a pane cannot hold one window's value), as they
are. A store already paned, or tumbling, needs nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import islice, zip_longest

from statestore.conn.cassandra import DDL_PROFILE
from statestore.core.codecs import LONG
from statestore.core.errors import (
    StoreChangedError,
    UnsupportedOperationError,
    WriterMayBeLiveError,
)
from statestore.core.model import EVERYTHING, PaneEntry, StoreSpec, WindowedEntry
from statestore.core.names import validate_store_name
from statestore.store import admin
from statestore.store.book import registry, schema
from statestore.store.book.lease import StoreLease, describe_self
from statestore.store.relayout import SWAPPED, next_table, settle_moved_table
from statestore.store.tables import window_table_for

_log = logging.getLogger(__name__)
_LEASE_TTL_S = 30.0
_CHUNK = 20_000  # windows read before they are written (bounded memory)
_ALL_STARTS = (0, 2**63 - 1)


@dataclass(frozen=True)
class PanesMigration:
    """What turning a store into panes did: the tables, the windows copied and verified."""

    store: str
    old_table: str
    new_table: str
    windows: int
    seconds: float

    def describe(self) -> str:
        return (
            f"store {self.store}: hopping windows now kept as panes in {self.new_table} ({self.windows} window(s) "
            f"copied and verified in {self.seconds:.1f}s); {self.old_table} is kept as the way back: drop it with "
            f"`statestore relayout {self.store} --drop-table {self.old_table} --yes`"
        )

    def as_dict(self) -> dict:
        return {**vars(self), "old_table_kept": True}


@dataclass(frozen=True)
class StoreMigration:
    """One store's migration: its schema (schema.Migration) and, when it was turned into panes, that."""

    bookkeeping: schema.Migration
    panes: PanesMigration | None = None

    @property
    def store(self) -> str:
        return self.bookkeeping.store

    def describe(self) -> str:
        """One line for the schema, a second one when the store was turned into panes."""
        return "\n".join(part.describe() for part in (self.bookkeeping, self.panes) if part is not None)

    def as_dict(self) -> dict:
        """The schema migration's fields (as before panes), and `panes` when it was turned into panes."""
        return self.bookkeeping.as_dict() | ({} if self.panes is None else {"panes": self.panes.as_dict()})


def panes_refusal(spec: StoreSpec) -> str | None:
    """Pure: why store `spec` cannot be turned into panes, or None. A store already paned or
    tumbling can (there is nothing to do: needs_panes)."""
    if not spec.store_type.windowed:
        return f"store '{spec.name}' is {spec.store_type.value}: only window stores keep panes"
    if spec.value_codec != LONG.name:
        return (
            f"store '{spec.name}' holds {spec.value_codec} values: only count stores (long values, a window the "
            "sum of its panes) keep hopping windows as panes; it keeps a row per window. Nothing was written."
        )
    return None


def needs_panes(spec: StoreSpec) -> bool:
    """Pure: whether `spec` is a hopping window store that keeps a row per window."""
    return spec.store_type.windowed and not spec.windowing.tumbling and not spec.windowing.panes


def migrated_to_panes(spec: StoreSpec, progress: registry.StoreProgress) -> bool:
    """Pure: whether `statestore migrate` turns `spec` into panes: a hopping count store with a
    row per window that a stream feeds (a topic recorded or a batch begun). One written only by
    the library's put() keeps its rows: a paned store takes no put of one window."""
    fed = progress.source_topic is not None or progress.has_batches
    return needs_panes(spec) and panes_refusal(spec) is None and fed


def migrate_store(session, keyspace: str, name: str, *, concurrency: int = 64) -> StoreMigration:
    """Store `name`'s schema brought to this release's (schema.migrate_store), then, when
    `migrated_to_panes`, the store turned into panes (to_panes). Idempotent."""
    bookkeeping = schema.migrate_store(session, keyspace, name)
    spec = registry.lookup(session, keyspace, name)
    if not migrated_to_panes(spec, registry.progress(session, keyspace, name)):
        return StoreMigration(bookkeeping)
    return StoreMigration(bookkeeping, to_panes(session, keyspace, name, concurrency=concurrency))


def migrate_keyspace(session, keyspace: str) -> list[StoreMigration]:
    """Every registered store of `keyspace` migrated, by name (the first refusal stops it)."""
    return [migrate_store(session, keyspace, spec.name) for spec, _ in registry.list_stores(session, keyspace)]


def to_panes(session, keyspace: str, name: str, *, concurrency: int = 64) -> PanesMigration | None:
    """Turn window store `name` into panes (see the module doc); None when it needs nothing (paned
    already, or tumbling). UnsupportedOperationError before anything is written when it cannot
    (panes_refusal); LeaseHeldError while a stream writes it."""
    spec = registry.lookup(session, keyspace, validate_store_name(name))
    refusal = panes_refusal(spec)
    if refusal is not None:
        raise UnsupportedOperationError(refusal)
    if not needs_panes(spec):
        return None
    began = time.monotonic()
    lease = StoreLease(
        session, keyspace, name, "(none: a migration)", _LEASE_TTL_S, f"statestore migrate ({describe_self()})"
    )
    lease.acquire(same_checkpoint_wait_s=0)  # LeaseHeldError while a stream writes the store
    lease.start_renewing()
    try:
        # As a re-layout: a paused writer records nothing more from here on, and the switch is
        # conditional on this epoch (a conversion that lost its lease to a newer writer is refused).
        epoch = registry.take_epoch(session, spec)
        spec = registry.lookup(session, keyspace, name)  # as of that epoch
        if not needs_panes(spec):  # another migration did it meanwhile
            return None
        progress = registry.progress(session, keyspace, name)
        if progress.unfinished_batch is not None:
            raise WriterMayBeLiveError(
                f"store '{name}' not turned into panes: its batch {progress.unfinished_batch} was begun and never "
                "recorded, so its writer may still send windows to the old table. Restart the stream so it "
                "finishes the batch, stop it, then migrate. Nothing was copied."
            )
        target = replace(spec, table_name=next_table(session, spec), windowing=replace(spec.windowing, panes=True))
        options = admin.describe_store(session, keyspace, name, count_partitions=False).table_options
        session.execute(window_table_for(target).create_cql(options), execution_profile=DDL_PROFILE)
        swap_sent = False
        try:
            windows = _copy_and_verify(session, spec, target, progress.last_ts, concurrency, lease)
            lease.check()
            swap_sent = True
            registry.swap_windowing(session, spec, target.table, target.windowing, epoch)
        except BaseException as exc:
            if settle_moved_table(session, target, epoch, swap_sent, exc, "migration") != SWAPPED:
                raise
    finally:
        lease.release()
    result = PanesMigration(name, spec.table, target.table, windows, round(time.monotonic() - began, 2))
    _log.info("keyspace %s: %s", keyspace, result.describe())
    return result


def _windows(session, spec: StoreSpec) -> Iterator[WindowedEntry]:
    """Every stored window of `spec`'s table, expired ones too, by key then start."""
    table = window_table_for(spec)
    return table.fetch_range(session, table.segments(session), EVERYTHING, *_ALL_STARTS)


def _pane(window: WindowedEntry) -> PaneEntry:
    """The pane row that counts in `window` alone: pane and from its start."""
    if len(window.value) != 8:
        raise StoreChangedError(
            f"window {window.start_ms} of key {window.key!r} holds {len(window.value)} bytes, not a long: the "
            "store cannot keep panes. The new table was dropped and the store still uses its old table."
        )
    return PaneEntry(window.key, window.start_ms, window.start_ms, window.value, window.batch_id, window.time_ms)


def _copy_and_verify(
    session, source: StoreSpec, target: StoreSpec, write_ts: int | None, concurrency: int, lease: StoreLease
) -> int:
    """Copy every window row of `source` as a pane row of `target`; the number copied, once every
    window of `target` (read through its panes) equals the row of `source`, both read again."""
    paned = window_table_for(target)
    table = window_table_for(source)
    copied = 0
    windows = table.fetch_lifetimes(session, table.segments(session))
    while chunk := list(islice(windows, _CHUNK)):
        lease.check()
        panes, ttls = [_pane(window) for window, _ in chunk], [ttl for _, ttl in chunk]
        paned.write_panes(session, panes, concurrency, write_ts, ttls)
        copied += len(chunk)
    # Both read again, in the same order: a window written to the source once copied, a lost
    # write or a window the panes compose otherwise shows as the first pair that differs.
    checked = 0
    for old, new in zip_longest(_windows(session, source), _windows(session, target)):
        if old != new:
            raise StoreChangedError(
                f"store '{source.name}' not turned into panes: window {_shown(old)} of {source.table} reads back as "
                f"{_shown(new)} from {target.table} after {checked} equal ones ({copied} copied). The store was "
                "written during the copy (by something that holds no lease) or a write was lost; the new table "
                "was dropped and the store still uses its old table. Stop every writer and run it again."
            )
        checked += 1
    if checked != copied:
        raise StoreChangedError(
            f"store '{source.name}' not turned into panes: {copied} windows copied, {checked} read back from both "
            "tables: the store was written during the copy. The store still uses its old table; run it again."
        )
    return copied


def _shown(window: WindowedEntry | None) -> str:
    if window is None:
        return "(none)"
    return f"(key {window.key!r}, start {window.start_ms}, value {window.value.hex()}, batch {window.batch_id})"
