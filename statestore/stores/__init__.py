"""Store types: one module per type owns that type's CQL."""

from statestore.stores.base import Entry, KeyValueTable, StoreSpec, StoreType
from statestore.stores.global_kv import GlobalKeyValueTable
from statestore.stores.partitioned_kv import PartitionedKeyValueTable

_TABLES = {
    StoreType.PARTITIONED_KV: PartitionedKeyValueTable,
    StoreType.GLOBAL_KV: GlobalKeyValueTable,
}


def table_for(spec: StoreSpec) -> KeyValueTable:
    """The table module of `spec`'s store type (no I/O)."""
    return _TABLES[spec.store_type](spec)


__all__ = ["Entry", "KeyValueTable", "StoreSpec", "StoreType", "table_for"]
