"""Store types: one module per type owns that type's CQL."""

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import StoreSpec, StoreType
from statestore.store.tables.base import KeyValueTable
from statestore.store.tables.global_kv import GlobalKeyValueTable
from statestore.store.tables.global_versioned import GlobalVersionedTable
from statestore.store.tables.partitioned_kv import PartitionedKeyValueTable
from statestore.store.tables.partitioned_versioned import PartitionedVersionedTable

_TABLES = {
    StoreType.PARTITIONED_KV: PartitionedKeyValueTable,
    StoreType.GLOBAL_KV: GlobalKeyValueTable,
    StoreType.PARTITIONED_VERSIONED: PartitionedVersionedTable,
    StoreType.GLOBAL_VERSIONED: GlobalVersionedTable,
}


def table_for(spec: StoreSpec, profile: object = EXEC_PROFILE_DEFAULT) -> KeyValueTable:
    """The table module of `spec`'s store type (no I/O); statements run with `profile`."""
    table = _TABLES.get(spec.store_type)
    if table is None:
        raise UnsupportedOperationError(f"store type {spec.store_type.value} has no table module yet")
    return table(spec, profile)


__all__ = ["KeyValueTable", "table_for"]
