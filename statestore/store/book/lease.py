"""One writer per store: a lease row in Cassandra, taken and renewed with lightweight transactions.

The lease row carries a TTL, so a holder that crashes loses it without anyone's help after
`ttl_s`; a live holder renews it every third of that. A second writer with another checkpoint
fails at once with the holder's name. A writer restarted from the same checkpoint (the crash
case) waits up to one TTL for the dead holder's lease to expire, then takes over.

The driver checks the lease before each micro-batch and refuses to write once a renewal has
failed or is overdue, so a paused ("zombie") driver stops writing before anyone else can start.
A driver paused in the middle of a batch is stopped by fencing instead: whoever takes the lease
next takes a newer epoch of the store (statestore.store.book.registry), and the paused driver's
progress updates are refused. Lease writes are lightweight transactions on the bookkeeping
profile (SERIAL, then QUORUM), and the holder is read serially, so one replica of
three may be down. A keyspace spread over several data centers needs levels that overlap
across them: taking a lease refuses LOCAL_SERIAL, LOCAL_QUORUM and LOCAL_ONE there
(statestore.conn.cassandra.check_writer_scope).

Besides the stream, `statestore reset` (statestore.store.admin.truncate_store) holds a store's
lease while it empties the store, under a holder name of its own and the checkpoint
RESET_CHECKPOINT. Its lease is durable (no TTL): a reset paused between its last epoch check
and its TRUNCATE (which no transaction can make conditional) keeps the store from every stream
until it has finished, however long the pause. A reset whose process is gone leaves its lease
behind: every writer is refused, naming it, until a reset run again with `writer_stopped`
takes the lease over (`take_over`, conditional on the holder it saw) and finishes.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from statestore.conn.cassandra import (
    BOOKKEEPING_PROFILE,
    DDL_PROFILE,
    check_writer_scope,
    prepare,
    serial_read,
    table_metadata,
)
from statestore.core.errors import StateStoreError
from statestore.core.names import validate_keyspace, validate_store_name

LEASE_TABLE = "statestore_leases"
RESET_CHECKPOINT = "(none: a reset)"  # the checkpoint a reset's lease names (admin.truncate_store)
_POLL_S = 1.0
_log = logging.getLogger(__name__)


class LeaseHeldError(StateStoreError):
    """Another writer holds the store."""


class LeaseLostError(StateStoreError):
    """This writer's lease expired or was taken: it must stop writing."""


@dataclass(frozen=True)
class Holder:
    holder: str
    checkpoint: str | None
    acquired_at: object


def create_cql(keyspace: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {validate_keyspace(keyspace)}.{LEASE_TABLE} ("
        " store text PRIMARY KEY, holder text, checkpoint text, acquired_at timestamp, renewed_at timestamp)"
        " WITH comment = 'statestore: which writer holds each store (rows expire by TTL)'"
    )


def held_message(store: str, holder: str, checkpoint: str | None, acquired_at: object) -> str:
    """Why a writer is refused the store's lease: `holder` has it (a reset's lease names its
    way out: it never expires by itself)."""
    since = "an unknown time" if acquired_at is None else f"{acquired_at:%Y-%m-%d %H:%M:%S} UTC"
    if checkpoint == RESET_CHECKPOINT:
        return (
            f"store '{store}' is held by an unfinished reset, {holder} (since {since}): a reset holds the store "
            "until it has finished, however long it is paused, so that no stream writes what it may still delete. "
            "Wait for it to finish. If that reset's process is gone (it crashed or was killed), run the reset "
            "again with --writer-stopped (hook: writer_stopped=True; admin DAG: param writer_stopped): it takes "
            "the store over and finishes the reset"
        )
    return (
        f"store '{store}' is being written by {holder} (checkpoint {checkpoint}, since {since}). Only one query may "
        "write a store: stop that query first. If it crashed, its lease expires within its TTL "
        "(30 s by default) after its last renewal and a restart then takes over."
    )


def _has_lease_table(session, keyspace: str) -> bool:
    return table_metadata(session, keyspace, LEASE_TABLE) is not None


def current_holder(session, keyspace: str, store: str) -> Holder | None:
    """Who holds the store's lease now, if anyone (a missing lease table means nobody)."""
    if not _has_lease_table(session, keyspace):
        return None
    select = prepare(session, f"SELECT holder, checkpoint, acquired_at FROM {keyspace}.{LEASE_TABLE} WHERE store = ?")
    row = serial_read(session, select, (validate_store_name(store),)).one()
    return None if row is None else Holder(row.holder, row.checkpoint, row.acquired_at)


def holders(session, keyspace: str) -> dict[str, Holder]:
    """Every store's current lease holder, by store (one read of the small lease table)."""
    if not _has_lease_table(session, keyspace):
        return {}
    rows = session.execute(
        f"SELECT store, holder, checkpoint, acquired_at FROM {keyspace}.{LEASE_TABLE}",
        execution_profile=BOOKKEEPING_PROFILE,
    )
    return {row.store: Holder(row.holder, row.checkpoint, row.acquired_at) for row in rows}


def describe_self() -> str:
    """host:pid:random, unique per process start."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class StoreLease:
    def __init__(
        self,
        session,
        keyspace: str,
        store: str,
        checkpoint: str,
        ttl_s: float,
        holder: str | None = None,
        *,
        durable: bool = False,
    ) -> None:
        """`holder`: the name others see (describe_self() by default; a reset names itself).
        `durable`: the row has no TTL (a reset's): it lives until released or taken over; it is
        still renewed every third of `ttl_s`, which finds out when it was taken over."""
        self.session = session
        self.keyspace = validate_keyspace(keyspace)
        self.store = validate_store_name(store)
        self.checkpoint = checkpoint
        self.ttl_s = ttl_s
        self.holder = holder or describe_self()
        self.durable = durable
        self._valid_until = 0.0
        self._acquired_at: datetime | None = None
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _ttl(self) -> int:
        """The row's TTL in seconds (0: none, a durable lease)."""
        return 0 if self.durable else max(1, round(self.ttl_s))

    def _serial(self, cql: str):
        """A lightweight transaction (its serial consistency comes from the bookkeeping profile)."""
        return prepare(self.session, cql)

    def _try_insert(self):
        insert = self._serial(
            f"INSERT INTO {self.keyspace}.{LEASE_TABLE} (store, holder, checkpoint, acquired_at, renewed_at)"
            " VALUES (?, ?, ?, ?, toTimestamp(now())) IF NOT EXISTS USING TTL ?"
        )
        started = time.monotonic()
        # Kept to be written again by every renewal: a cell's TTL is set by its last write, so
        # acquired_at, written only here, would expire after one TTL while renewals keep the row.
        self._acquired_at = datetime.now(UTC)
        row = self.session.execute(
            insert,
            (self.store, self.holder, self.checkpoint, self._acquired_at, self._ttl()),
            execution_profile=BOOKKEEPING_PROFILE,
        ).one()
        if row.applied:
            self._valid_until = started + self.ttl_s
        return row

    def acquire(self, same_checkpoint_wait_s: float | None = None) -> None:
        """Take the lease, or raise LeaseHeldError naming who has it (ConfigError, before
        anything, when the session's levels do not overlap across the keyspace's data centers)."""
        check_writer_scope(self.session, self.keyspace)
        self.session.execute(create_cql(self.keyspace), execution_profile=DDL_PROFILE)
        wait_s = self.ttl_s + 5 if same_checkpoint_wait_s is None else same_checkpoint_wait_s
        deadline = time.monotonic() + wait_s
        while True:
            row = self._try_insert()
            if row.applied or row.holder == self.holder:  # ours: a retried insert that had succeeded
                _log.info("store %s: lease taken by %s", self.store, self.holder)
                return
            same_job = row.checkpoint == self.checkpoint
            if not same_job or time.monotonic() >= deadline:
                raise LeaseHeldError(held_message(self.store, row.holder, row.checkpoint, row.acquired_at))
            _log.info("store %s: waiting for the lease of %s (same checkpoint: a restart)", self.store, row.holder)
            time.sleep(_POLL_S)

    def take_over(self, seen: str) -> None:
        """Take the lease from `seen`, its holder as last read (a reset's, whose process is gone),
        by a transaction conditional on that holder; LeaseHeldError when someone else has it now."""
        check_writer_scope(self.session, self.keyspace)
        update = self._serial(
            f"UPDATE {self.keyspace}.{LEASE_TABLE} USING TTL ? SET holder = ?, checkpoint = ?,"
            " acquired_at = ?, renewed_at = toTimestamp(now()) WHERE store = ? IF holder = ?"
        )
        started = time.monotonic()
        self._acquired_at = datetime.now(UTC)
        row = self.session.execute(
            update,
            (self._ttl(), self.holder, self.checkpoint, self._acquired_at, self.store, seen),
            execution_profile=BOOKKEEPING_PROFILE,
        ).one()
        if not row.applied and getattr(row, "holder", None) != self.holder:  # ours: a retried update that applied
            now = getattr(row, "holder", None)
            if now is None:  # gone since it was read (released, or an earlier release's reset whose TTL ran out)
                self.acquire(same_checkpoint_wait_s=0)
                return
            raise LeaseHeldError(held_message(self.store, now, getattr(row, "checkpoint", None), None))
        _log.warning("store %s: lease of %s taken over by %s", self.store, seen, self.holder)
        self._valid_until = started + self.ttl_s

    def renew(self) -> None:
        update = self._serial(
            f"UPDATE {self.keyspace}.{LEASE_TABLE} USING TTL ? SET holder = ?, checkpoint = ?,"
            " acquired_at = ?, renewed_at = toTimestamp(now()) WHERE store = ? IF holder = ?"
        )
        started = time.monotonic()
        row = self.session.execute(
            update,
            (self._ttl(), self.holder, self.checkpoint, self._acquired_at, self.store, self.holder),
            execution_profile=BOOKKEEPING_PROFILE,
        ).one()
        if not row.applied:
            holder = getattr(row, "holder", None)
            if holder is None:
                self._lost = f"the lease expired: it was not renewed within {self._ttl()}s"
            else:
                self._lost = f"the lease was taken by {holder}"
            raise LeaseLostError(f"store '{self.store}': {self._lost}")
        self._valid_until = started + self.ttl_s

    def check(self) -> None:
        """Raise LeaseLostError unless the lease is surely still ours for a while."""
        if self._lost:
            raise LeaseLostError(f"store '{self.store}': {self._lost}; this query stops writing")
        margin = self.ttl_s / 3
        if time.monotonic() > self._valid_until - margin:
            self.renew()  # overdue (e.g. the renewer stalled): renew now or fail

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                self.renew()
            except LeaseLostError:
                _log.error("store %s: lease lost; the next batch will fail", self.store)
                return
            except Exception as exc:  # noqa: BLE001 - a failed renewal is retried; check() enforces expiry
                _log.warning("store %s: lease renewal failed (%s); retrying", self.store, exc)

    def start_renewing(self) -> None:
        self._thread = threading.Thread(target=self._renew_loop, name=f"lease-{self.store}", daemon=True)
        self._thread.start()

    def stop_renewing(self) -> None:
        """Stop the renewals and keep the row (a durable lease: held until released or taken over)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def release(self) -> None:
        self.stop_renewing()
        try:
            delete = self._serial(f"DELETE FROM {self.keyspace}.{LEASE_TABLE} WHERE store = ? IF holder = ?")
            self.session.execute(delete, (self.store, self.holder), execution_profile=BOOKKEEPING_PROFILE)
        except Exception as exc:  # noqa: BLE001 - the TTL frees the lease anyway (a durable one is taken over)
            if self.durable:
                _log.error(
                    "store %s: could not release the lease of %s (%s); it has no TTL: writers are refused until a "
                    "reset run with --writer-stopped takes it over",
                    self.store,
                    self.holder,
                    exc,
                )
            else:
                _log.warning(
                    "store %s: could not release the lease (%s); it expires in %ss", self.store, exc, self._ttl()
                )
