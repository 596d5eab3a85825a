"""The versioned store facade without Cassandra: no I/O when built, bad arguments refused
before any query, CQL of both layouts, and the key-value operations it does not have."""

from __future__ import annotations

import pytest

from statestore.core import codecs
from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import Entry, KeyRange, StoreSpec, StoreType
from statestore.core.options import TableOptions
from statestore.store.builder import StoreBuilder, StoreOptions
from statestore.store.key_value import KeyValueStore
from statestore.store.tables import table_for
from statestore.store.versioned import VersionedStore


class NoSession:
    """Fails the test on any query: these operations must be refused before I/O."""

    def __getattr__(self, name):
        raise AssertionError(f"session.{name} used")


def _store(store_type=StoreType.PARTITIONED_VERSIONED) -> VersionedStore:
    builder = StoreBuilder(NoSession(), "hist", StoreOptions(keyspace="ks"))
    if store_type is StoreType.PARTITIONED_VERSIONED:
        return builder.partitioned_versioned_store(partitions=4)
    return builder.global_versioned_store()


def test_builder_makes_versioned_stores_without_io():
    assert isinstance(_store(), VersionedStore) and _store().spec.partitions == 4
    assert _store(StoreType.GLOBAL_VERSIONED).spec.store_type is StoreType.GLOBAL_VERSIONED


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.put("k", 1, -1), "timestamp must be between 0"),
        (lambda s: s.put("k", 1, 1.5), "timestamp is whole epoch milliseconds"),
        (lambda s: s.delete("k", "yesterday"), "timestamp is whole epoch milliseconds"),
        (lambda s: s.get("k", as_of=-5), "as_of must be between 0"),
        (lambda s: s.history("k", from_ms=-1), "from_ms must be between 0"),
        (lambda s: s.put("", 1, 5), "empty key"),
    ],
)
def test_bad_arguments_are_refused_before_any_query(call, message):
    with pytest.raises(ValueError, match=message):
        call(_store())


def test_key_value_operations_without_a_time_name_what_to_use():
    store = _store()
    with pytest.raises(UnsupportedOperationError, match=r"use put\(key, value, timestamp\)"):
        store.put_if_absent("k", 1)
    with pytest.raises(UnsupportedOperationError, match=r"use delete\(key, timestamp\)"):
        store.table.delete(NoSession(), b"k")
    with pytest.raises(UnsupportedOperationError, match=r"use put\(key, value, timestamp\)"):
        store.table.put_if_absent(NoSession(), Entry(b"k", b"v"))


def test_global_versioned_has_no_range_or_prefix_scans():
    store = _store(StoreType.GLOBAL_VERSIONED)
    with pytest.raises(UnsupportedOperationError, match=r"global-versioned store.*partitioned-versioned store"):
        store.table.scan(NoSession(), KeyRange(b"a", b"b"))


def test_the_two_store_families_refuse_each_others_specs():
    versioned = StoreSpec("ks", "v", StoreType.GLOBAL_VERSIONED, 1)
    plain = StoreSpec("ks", "p", StoreType.GLOBAL_KV, 1)
    with pytest.raises(UnsupportedOperationError, match="open it as a versioned store"):
        KeyValueStore(NoSession(), versioned, codecs.STRING, codecs.LONG)
    with pytest.raises(UnsupportedOperationError, match="open it as a key-value store"):
        VersionedStore(NoSession(), plain, codecs.STRING, codecs.LONG)


def test_table_cql_keeps_each_keys_versions_together_newest_first():
    options = TableOptions(default_time_to_live=60)
    partitioned = table_for(StoreSpec("ks", "pv", StoreType.PARTITIONED_VERSIONED, 4)).create_cql(options)
    assert "PRIMARY KEY ((partition), key, valid_to)" in partitioned
    assert "CLUSTERING ORDER BY (key ASC, valid_to DESC)" in partitioned and "default_time_to_live = 60" in partitioned
    glob = table_for(StoreSpec("ks", "gv", StoreType.GLOBAL_VERSIONED, 1)).create_cql()
    assert "PRIMARY KEY ((key), valid_to)" in glob and "CLUSTERING ORDER BY (valid_to DESC)" in glob
    assert "comment = 'statestore global-versioned store gv'" in glob
