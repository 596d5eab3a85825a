"""Schema versions: the layout of the bookkeeping a store was last brought to, and the migration
that brings a store made by an earlier release up to this release's.

Each store's registry row holds `schema_version`. Version 1 is every store registered before
versions existed (the column is absent or null): its registry, stream log and dead-letter tables
may lack columns later releases added (fencing epochs, outside-write marks, windowing, the
topic's id, sub-partitions, retention, the TTL horizon, the stream log's writer). Version 2
lacks the registry's `pending_rules` (the rules a pending batch began under, which its replay
keeps: a writer of version 2 would begin batches without them). Version 3 is this release's.
A store is registered at the current version; older ones are brought up by
`statestore migrate` (also the state_store_admin DAG's `migrate` action), which

- holds the store's lease while it runs (refused while a stream writes the store: a migration
  is only safe while no stream writes),
- adds what the keyspace's bookkeeping tables and the store's dead-letter table lack (every
  step is idempotent: `IF NOT EXISTS`, columns added only when missing),
- and then records the version (a lightweight transaction, the last step: a migration that
  stopped half-way is simply run again).

The stream refuses a store of another version before it writes anything: an older one with a
message naming `statestore migrate`, a newer one (migrated by a newer release) naming the
upgrade. The rule lives here; the registry only stores the number.
"""

from __future__ import annotations

from dataclasses import dataclass

from statestore.core.errors import StoreSchemaError
from statestore.store.book import deadletters, history, registry, stream_log
from statestore.store.book.lease import StoreLease, describe_self

SCHEMA_VERSION = registry.CURRENT_SCHEMA_VERSION  # the version this release writes and requires
BEFORE_VERSIONS = 1  # a store registered before schema versions existed
_LEASE_TTL_S = 60


@dataclass(frozen=True)
class Migration:
    """One store's migration: from which version to which, and what it added."""

    store: str
    from_version: int
    to_version: int
    added: tuple[str, ...]  # "table.column" of each column added

    @property
    def changed(self) -> bool:
        return self.from_version != self.to_version or bool(self.added)

    def describe(self) -> str:
        if not self.changed:
            return f"store {self.store}: schema {self.to_version}, up to date"
        added = f" (added {', '.join(self.added)})" if self.added else ""
        return f"store {self.store}: schema {self.from_version} -> {self.to_version}{added}"

    def as_dict(self) -> dict:
        return {"store": self.store, "from": self.from_version, "to": self.to_version, "added": list(self.added)}


def version_problem(name: str, version: int) -> str | None:
    """Pure: why a writer of this release must not write store `name` at schema `version`, or None."""
    if version < SCHEMA_VERSION:
        return (
            f"store '{name}' has schema version {version} (made by an earlier release of statestore); this release "
            f"needs version {SCHEMA_VERSION}. Stop every stream of it and run `statestore migrate {name}` "
            "(or the state_store_admin DAG's migrate action), then start the stream again. Nothing was written."
        )
    if version > SCHEMA_VERSION:
        return (
            f"store '{name}' has schema version {version}, newer than this release's {SCHEMA_VERSION} (a newer "
            "release of statestore migrated it): upgrade statestore to write it. Nothing was written."
        )
    return None


def stored_version(session, keyspace: str, name: str) -> int:
    """The schema version of registered store `name` (BEFORE_VERSIONS when none is recorded)."""
    return registry.stored_schema_version(session, keyspace, name) or BEFORE_VERSIONS


def require_current(session, keyspace: str, name: str) -> None:
    """StoreSchemaError unless registered store `name` is at this release's version."""
    problem = version_problem(name, stored_version(session, keyspace, name))
    if problem:
        raise StoreSchemaError(problem)


def migrate_store(session, keyspace: str, name: str) -> Migration:
    """Bring store `name` up to SCHEMA_VERSION (see the module doc); idempotent: a store already
    there is left alone (its lease not taken, so a running stream is no obstacle)."""
    found = stored_version(session, keyspace, name)  # the name checked, StoreNotFoundError: before anything
    if found == SCHEMA_VERSION:
        return Migration(name, found, found, ())
    if found > SCHEMA_VERSION:
        raise StoreSchemaError(version_problem(name, found))
    lease = StoreLease(
        session, keyspace, name, "(none: a migration)", _LEASE_TTL_S, f"statestore migrate ({describe_self()})"
    )
    lease.acquire(same_checkpoint_wait_s=0)  # LeaseHeldError while a stream writes the store
    try:
        added = (
            *registry.ensure_table(session, keyspace),
            *stream_log.ensure_tables(session, keyspace),
            *deadletters.ensure_table(session, keyspace, name),
        )
        history.ensure_table(session, keyspace)
        lease.check()
        registry.record_schema_version(session, keyspace, name, SCHEMA_VERSION)
    finally:
        lease.release()
    return Migration(name, found, SCHEMA_VERSION, tuple(added))


def migrate_keyspace(session, keyspace: str) -> list[Migration]:
    """Every registered store of `keyspace` migrated, by name (the first refusal stops it)."""
    return [migrate_store(session, keyspace, spec.name) for spec, _ in registry.list_stores(session, keyspace)]
