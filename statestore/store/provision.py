"""Schema steps for a store: registry, store table, dead-letter table.

Safe when many workers run it at once: every CREATE is IF NOT EXISTS, and the store's
layout is fixed by one lightweight transaction (statestore.store.book.registry.register).

The rule it keeps: a table is created only for a store that holds no batches. A registered
store whose table is gone while its registry records batches (a drop-store interrupted between
its DROP and its unregister, a table dropped by hand, a re-layout's clean-up that dropped the
table its swap installed) is refused, before anything is written: a new, empty table would be
counted on from the recorded offsets, every earlier count lost without a word.
"""

from __future__ import annotations

from statestore.conn.cassandra import DDL_PROFILE, require_keyspace
from statestore.core.errors import StoreNotFoundError, StoreTableLostError
from statestore.core.model import StoreSpec, StoreType
from statestore.core.options import TableOptions
from statestore.store.book import deadletters, dropped, registry
from statestore.store.tables import create_cql_for

DEFAULT_STORE_TYPE = StoreType.PARTITIONED_KV


def provision_store(
    session,
    spec: StoreSpec,
    source_topic: str | None = None,
    *,
    options: TableOptions | None = None,
    create_table: bool = True,
    dead_letters: bool = True,
    ddl_profile: object = DDL_PROFILE,
    dead_letter_retention_s: int | None = None,
) -> StoreSpec:
    """Create what `spec` needs and register it; returns the registered spec. With
    `create_table` off the table must already exist (created by whoever manages schemas).
    `dead_letter_retention_s`: the dead-letter table's TTL (deadletters.ensure_table)."""
    require_keyspace(session, spec.keyspace)
    registry.ensure_table(session, spec.keyspace, ddl_profile)
    if not create_table and not table_exists(session, spec.keyspace, spec.table):
        raise StoreNotFoundError(
            f"table {spec.keyspace}.{spec.table} of store '{spec.name}' does not exist and table creation is "
            "off: create it (its CQL is in docs/stores.md, the store types table) or turn table creation on"
        )
    # A store created again under a dropped store's name starts in a table that store never used.
    registered = registry.register(session, dropped.past_dropped(session, spec), source_topic)
    if create_table:
        if not table_exists(session, registered.keyspace, registered.table):
            _refuse_if_it_holds_batches(session, registered)
        session.execute(create_cql_for(registered, options), execution_profile=ddl_profile)
    if dead_letters:
        deadletters.ensure_table(session, spec.keyspace, spec.name, ddl_profile, dead_letter_retention_s)
    return registered


def _refuse_if_it_holds_batches(session, spec: StoreSpec) -> None:
    """StoreTableLostError when the registry records batches of a store whose table is missing."""
    progress = registry.progress(session, spec.keyspace, spec.name)
    if progress.has_batches:
        last = progress.last_batch_id if progress.last_batch_id is not None else progress.pending_batch_id
        raise StoreTableLostError(
            f"store '{spec.name}': its table {spec.keyspace}.{spec.table} is gone, but the registry records its "
            f"batches up to {last}: a new, empty table would be counted on from there and every earlier count lost. "
            "Nothing was written. Restore the table from a backup (with its rows), or start the store over: "
            f"`statestore reset {spec.name} --yes` (a new, empty table), then a new, empty --checkpoint counts from "
            "--starting-offsets."
        )


def table_exists(session, keyspace: str, table: str) -> bool:
    row = session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s", (keyspace, table)
    ).one()
    return row is not None
