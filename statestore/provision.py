"""Schema steps for a store: registry, store table, dead-letter table.

Safe when many workers run it at once: every CREATE is IF NOT EXISTS, and the store's
layout is fixed by one lightweight transaction (statestore.registry.register).
"""

from __future__ import annotations

from statestore import deadletters, registry
from statestore.cassandra import DDL_PROFILE, require_keyspace
from statestore.stores import StoreSpec, StoreType, table_for

DEFAULT_STORE_TYPE = StoreType.PARTITIONED_KV


def provision_store(session, spec: StoreSpec, source_topic: str | None = None) -> StoreSpec:
    """Create what `spec` needs and register it; returns the registered spec."""
    require_keyspace(session, spec.keyspace)
    registry.ensure_table(session, spec.keyspace)
    registered = registry.register(session, spec, source_topic)
    session.execute(table_for(registered).create_cql(), execution_profile=DDL_PROFILE)
    deadletters.ensure_table(session, spec.keyspace, spec.name)
    return registered
