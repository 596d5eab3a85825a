"""Store types' tables: one module per type owns that type's CQL; base, segmented, paging and
unlogged hold what several share. Opening a table module does no I/O."""

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import StoreSpec, StoreType
from statestore.core.options import TableOptions
from statestore.store.tables.base import KeyValueTable
from statestore.store.tables.global_kv import GlobalKeyValueTable
from statestore.store.tables.global_versioned import GlobalVersionedTable
from statestore.store.tables.paned_window import PanedWindowTable
from statestore.store.tables.partitioned_kv import PartitionedKeyValueTable
from statestore.store.tables.partitioned_session import PartitionedSessionTable
from statestore.store.tables.partitioned_versioned import PartitionedVersionedTable
from statestore.store.tables.partitioned_window import PartitionedWindowTable
from statestore.store.tables.subpartitioned_kv import SubpartitionedKeyValueTable
from statestore.store.tables.subpartitioned_versioned import SubpartitionedVersionedTable

_TABLES = {
    StoreType.PARTITIONED_KV: PartitionedKeyValueTable,
    StoreType.GLOBAL_KV: GlobalKeyValueTable,
    StoreType.PARTITIONED_VERSIONED: PartitionedVersionedTable,
    StoreType.GLOBAL_VERSIONED: GlobalVersionedTable,
}


def table_for(spec: StoreSpec, profile: object = EXEC_PROFILE_DEFAULT) -> KeyValueTable:
    """The table module of `spec`'s store type (no I/O); statements run with `profile`."""
    table = _TABLES.get(spec.store_type)
    if spec.store_type.timed:
        raise UnsupportedOperationError(
            f"store '{spec.name}' is {spec.store_type.value}: it holds windows or sessions, read it as such "
            "(statestore.store.window.WindowStore, statestore.store.session.SessionStore)"
        )
    if table is None:
        raise UnsupportedOperationError(f"store type {spec.store_type.value} has no table module yet")
    if spec.subpartitions > 1:
        table = SubpartitionedVersionedTable if spec.store_type.versioned else SubpartitionedKeyValueTable
    return table(spec, profile)


def window_table_for(
    spec: StoreSpec, profile: object = EXEC_PROFILE_DEFAULT
) -> PartitionedWindowTable | PanedWindowTable:
    """The table module of a window store (no I/O): a row per pane when its windowing keeps
    panes, else a row per window."""
    if not spec.store_type.windowed:
        raise UnsupportedOperationError(f"store '{spec.name}' is {spec.store_type.value}: it holds no windows")
    if spec.windowing.panes:
        return PanedWindowTable(spec, profile)
    return PartitionedWindowTable(spec, profile)


def session_table_for(spec: StoreSpec, profile: object = EXEC_PROFILE_DEFAULT) -> PartitionedSessionTable:
    """The table module of a session store (no I/O)."""
    if not spec.store_type.sessioned:
        raise UnsupportedOperationError(f"store '{spec.name}' is {spec.store_type.value}: it holds no sessions")
    return PartitionedSessionTable(spec, profile)


def _any_table_for(spec: StoreSpec):
    """The table module of a store of any type (no I/O)."""
    if spec.store_type.windowed:
        return window_table_for(spec)
    if spec.store_type.sessioned:
        return session_table_for(spec)
    return table_for(spec)


def default_options_for(spec: StoreSpec) -> TableOptions:
    """The table options a store of `spec`'s type is created with when none are given."""
    return _any_table_for(spec).default_options()


def options_with_compaction(spec: StoreSpec, compaction: str | None) -> TableOptions | None:
    """The options of a new store of `spec` created with the compaction class `compaction`:
    its type's defaults when that is their class too (None: the defaults), else that class
    with Cassandra's own sub-options."""
    defaults = default_options_for(spec)
    if compaction is None or compaction == defaults.compaction:
        return None
    return defaults.with_compaction(compaction)


def create_cql_for(spec: StoreSpec, options: TableOptions | None = None) -> str:
    """The CREATE TABLE of any store type (each type's default options when `options` is None)."""
    return _any_table_for(spec).create_cql(options)


__all__ = [
    "KeyValueTable",
    "PanedWindowTable",
    "PartitionedSessionTable",
    "PartitionedWindowTable",
    "SubpartitionedKeyValueTable",
    "SubpartitionedVersionedTable",
    "create_cql_for",
    "default_options_for",
    "options_with_compaction",
    "session_table_for",
    "table_for",
    "window_table_for",
]
