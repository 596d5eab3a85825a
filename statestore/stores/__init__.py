"""Store types: one module per type owns that type's CQL."""

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.errors import UnsupportedOperationError
from statestore.stores.base import Entry, KeyRange, KeyValueTable, StoreSpec, StoreType
from statestore.stores.global_kv import GlobalKeyValueTable
from statestore.stores.global_versioned import GlobalVersionedTable
from statestore.stores.partitioned_kv import PartitionedKeyValueTable
from statestore.stores.partitioned_versioned import PartitionedVersionedTable

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


__all__ = ["Entry", "KeyRange", "KeyValueTable", "StoreSpec", "StoreType", "table_for"]
