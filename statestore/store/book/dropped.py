"""The stores dropped in a keyspace and the tables each used: table `statestore_dropped_stores`.

A store dropped and created again under its name never reuses a table name a dropped store of
that name used. A task attempt of the dropped store's stream may outlive its batch (a
speculative attempt, an executor cut off from the driver but not from Cassandra): its entry
writes are not conditional (no epoch fences them), so they go on into the table the attempt
resolved. Under a name that no longer exists they fail; under the same name created again they
would land in the new store's table, where no tombstone and no epoch shadows them (the counts
of the new store wrong, without an error). So `drop_store` records every table it drops here,
before it drops them, and a store created under that name starts in the generation after the
highest of them (`<store>_store_r<k>`: names.next_generation_table).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from statestore.conn.cassandra import DDL_PROFILE, bookkeeping_profile, prepare
from statestore.core.errors import InvalidNameError
from statestore.core.model import StoreSpec
from statestore.core.names import (
    GENERATION_SUFFIX,
    next_generation_table,
    table_generation,
    validate_keyspace,
    validate_store_name,
)

TABLE = "statestore_dropped_stores"


def ensure_table(session, keyspace: str, ddl_profile: object = DDL_PROFILE) -> None:
    session.execute(
        f"CREATE TABLE IF NOT EXISTS {validate_keyspace(keyspace)}.{TABLE} (name text PRIMARY KEY, tables set<text>,"
        " dropped_at timestamp) WITH comment = 'statestore: the tables of dropped stores, never used again'",
        execution_profile=ddl_profile,
    )


def record_drop(session, keyspace: str, name: str, tables: Iterable[str]) -> None:
    """Record `tables` as used by store `name`, which is being dropped (before the DROPs: a drop
    interrupted after them leaves the record). The set only grows, so drops that race each other
    lose no table."""
    ensure_table(session, keyspace)
    update = prepare(
        session,
        f"UPDATE {validate_keyspace(keyspace)}.{TABLE} SET tables = tables + ?, dropped_at = toTimestamp(now())"
        " WHERE name = ?",
    )
    session.execute(update, (set(tables), validate_store_name(name)), execution_profile=bookkeeping_profile(session))


def dropped_tables(session, keyspace: str, name: str) -> frozenset[str]:
    """The tables dropped stores named `name` used (empty when none was dropped, or the keyspace
    never dropped a store). Read from the schema's own tables first, so a record table made a
    moment ago by another process is seen (a driver's cached schema may lag it)."""
    exists = session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (validate_keyspace(keyspace), TABLE),
    ).one()
    if exists is None:
        return frozenset()
    select = prepare(session, f"SELECT tables FROM {keyspace}.{TABLE} WHERE name = ?")
    row = session.execute(select, (validate_store_name(name),), execution_profile=bookkeeping_profile(session)).one()
    return frozenset(row.tables or ()) if row is not None else frozenset()


def table_after(table: str, used: Iterable[str]) -> str:
    """Pure: `table`, or when a dropped store used it or a later generation of it (`used`), the
    generation after the highest of those."""
    base, generation = table_generation(table)
    highest = max((g for b, g in map(table_generation, used) if b == base), default=-1)
    if generation > highest:
        return table
    following = next_generation_table(f"{base}{GENERATION_SUFFIX}{highest}" if highest else base)
    if following is None:
        raise InvalidNameError(
            f"table {table}: stores dropped and created again under this name have used every generation of it "
            "that fits in 48 characters: create the store under another name"
        )
    return following


def past_dropped(session, spec: StoreSpec) -> StoreSpec:
    """`spec` with its table moved past every table a dropped store of its name used
    (table_after); unchanged when none was dropped."""
    used = dropped_tables(session, spec.keyspace, spec.name)
    return replace(spec, table_name=table_after(spec.table, used)) if used else spec
