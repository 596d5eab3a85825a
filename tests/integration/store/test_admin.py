"""Store management (statestore.store.admin) on the real Cassandra: partitioned and global stores."""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest

from statestore.conn.cassandra import DDL_PROFILE, create_keyspace
from statestore.core.errors import (
    ConfirmationRequiredError,
    OptionError,
    StoreMismatchError,
    StoreNotFoundError,
    UnsupportedOperationError,
)
from statestore.core.partitioner import partition_for
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.book.lease import LeaseHeldError, StoreLease
from statestore.store.builder import open_store
from statestore.store.provision import table_exists


def _table_options(session, keyspace, table):
    session.cluster.refresh_table_metadata(keyspace, table)
    return session.cluster.metadata.keyspaces[keyspace].tables[table].options


def test_create_describe_and_list_a_partitioned_store(session, keyspace, store_name):
    spec = admin.create_store(
        session,
        keyspace,
        store_name,
        "partitioned-kv",
        4,
        {"ttl": 3600, "compaction": "SizeTieredCompactionStrategy", "gc_grace_seconds": 3600},
    )
    assert (spec.store_type.value, spec.partitions, spec.table) == ("partitioned-kv", 4, f"{store_name}_store")
    words = [f"w{i}" for i in range(200)]
    open_store(session, keyspace, store_name).put_all((w, i + 1) for i, w in enumerate(words))

    described = admin.describe_store(session, keyspace, store_name)
    assert "PRIMARY KEY (partition, key)" in described.schema_cql
    assert described.table_options.default_time_to_live == 3600
    assert described.table_options.compaction == "SizeTieredCompactionStrategy"
    assert described.table_options.gc_grace_seconds == 3600
    assert (described.as_dict()["size_nodes_answered"], described.as_dict()["size_nodes_total"]) == (1, 1)
    # Exact entries per store partition, as Kafka's partitioner spreads the keys.
    expected = Counter(partition_for(w.encode(), 4) for w in words)
    assert described.partition_stats.entries == tuple(expected[p] for p in range(4))
    assert described.partition_stats.total == 200
    assert described.writer is None and described.progress.last_batch_id is None
    as_dict = described.as_dict()
    assert as_dict["table_options"]["default_time_to_live"] == 3600
    assert as_dict["entries_per_partition"] == list(described.partition_stats.entries)

    listed = {s.spec.name: s for s in admin.list_stores(session, keyspace)}
    assert listed[store_name].spec == spec


def test_create_is_idempotent_and_refuses_another_layout(session, keyspace, store_name):
    first = admin.create_store(session, keyspace, store_name, "global-kv", 8)
    assert first.partitions == 1  # a global store has one logical partition whatever was asked
    assert admin.create_store(session, keyspace, store_name, "global-kv") == first
    with pytest.raises(StoreMismatchError, match="already exists as global-kv"):
        admin.create_store(session, keyspace, store_name, "partitioned-kv", 4)
    with pytest.raises(StoreMismatchError, match="string values"):
        admin.create_store(session, keyspace, store_name, "global-kv", value_codec="string")
    described = admin.describe_store(session, keyspace, store_name)
    assert described.partition_stats is None  # only partitioned layouts have store partitions
    assert "key blob PRIMARY KEY" in described.schema_cql


def test_bad_options_are_refused_before_any_cql(session, keyspace, store_name):
    with pytest.raises(OptionError, match="unknown table option 'tll'"):
        admin.create_store(session, keyspace, store_name, "partitioned-kv", 2, {"tll": 5})
    assert registry.find(session, keyspace, store_name) is None
    admin.create_store(session, keyspace, store_name, "partitioned-kv", 2)
    with pytest.raises(OptionError, match="default_time_to_live must be a whole number"):
        admin.alter_store(session, keyspace, store_name, {"ttl": -1})
    with pytest.raises(OptionError, match="unknown compaction"):
        admin.alter_store(session, keyspace, store_name, {"compaction": "Evil'); DROP TABLE x; --"})
    with pytest.raises(OptionError, match="no table option to change"):
        admin.alter_store(session, keyspace, store_name, {})
    assert _table_options(session, keyspace, f"{store_name}_store")["default_time_to_live"] == 0


def test_alter_ttl_and_compaction(session, keyspace, store_name):
    leveled = {"compaction": "LeveledCompactionStrategy", "compaction_options": {"fanout_size": 8}}
    admin.create_store(session, keyspace, store_name, "partitioned-kv", 2, leveled)
    table = f"{store_name}_store"
    assert registry.progress(session, keyspace, store_name).ttl_expiring_until is None
    before_ms = time.time() * 1000
    now = admin.alter_store(session, keyspace, store_name, {"ttl": "86400"})
    assert now.default_time_to_live == 86400
    # Recorded before the ALTER: a stream's apply cache trusts no file that may vouch for a row
    # written under the TTL, even one set and removed again between two of its batches' plans.
    assert registry.progress(session, keyspace, store_name).ttl_expiring_until >= before_ms + 86_400_000
    options = _table_options(session, keyspace, table)
    assert options["default_time_to_live"] == 86400
    assert options["compaction"]["fanout_size"] == "8"  # other options kept
    # Another compaction class starts from its own defaults: LCS's fanout_size would be invalid for it.
    admin.alter_store(session, keyspace, store_name, {"compaction": "SizeTieredCompactionStrategy"})
    options = _table_options(session, keyspace, table)
    assert options["compaction"]["class"].endswith("SizeTieredCompactionStrategy")
    assert "fanout_size" not in options["compaction"]
    assert options["default_time_to_live"] == 86400
    assert admin.describe_store(session, keyspace, store_name).table_options.default_time_to_live == 86400


def test_truncate_keeps_the_store_and_is_refused_while_written(session, keyspace, store_name):
    admin.create_store(session, keyspace, store_name, "partitioned-kv", 2)
    store = open_store(session, keyspace, store_name)
    store.put_all([("a", 1), ("b", 2)])
    lease = StoreLease(session, keyspace, store_name, "/checkpoints/x", ttl_s=30)
    lease.acquire()
    try:
        with pytest.raises(LeaseHeldError, match="stop that query before truncating"):
            admin.truncate_store(session, keyspace, store_name)
        assert dict(store.all()) == {"a": 1, "b": 2}
    finally:
        lease.release()
    admin.truncate_store(session, keyspace, store_name)
    assert list(store.all()) == []
    assert registry.lookup(session, keyspace, store_name).partitions == 2


def test_drop_needs_the_name_as_confirmation_and_no_writer(session, keyspace, store_name):
    admin.create_store(session, keyspace, store_name, "global-kv")
    open_store(session, keyspace, store_name).put("k", 1)
    for wrong in (None, "", "yes", store_name.upper()):
        with pytest.raises(ConfirmationRequiredError, match=f"'{store_name}'"):
            admin.drop_store(session, keyspace, store_name, wrong)
    lease = StoreLease(session, keyspace, store_name, "/checkpoints/y", ttl_s=30)
    lease.acquire()
    try:
        with pytest.raises(LeaseHeldError):
            admin.drop_store(session, keyspace, store_name, store_name)
    finally:
        lease.release()
    assert open_store(session, keyspace, store_name).get("k") == 1

    admin.drop_store(session, keyspace, store_name, store_name)
    assert not table_exists(session, keyspace, f"{store_name}_store")
    assert store_name not in {s.spec.name for s in admin.list_stores(session, keyspace)}
    with pytest.raises(StoreNotFoundError):
        admin.describe_store(session, keyspace, store_name)


def test_top_entries(session, keyspace, store_name):
    admin.create_store(session, keyspace, store_name, "partitioned-kv", 3)
    open_store(session, keyspace, store_name).put_all([("a", 5), ("b", 9), ("c", 5), ("d", 1)])
    assert admin.top_entries(session, keyspace, store_name, 3) == [("b", 9), ("a", 5), ("c", 5)]
    other = f"{store_name}_j"
    admin.create_store(session, keyspace, other, "global-kv", value_codec="json")
    with pytest.raises(UnsupportedOperationError, match="json values"):
        admin.top_entries(session, keyspace, other)


def test_list_stores_of_a_keyspace_without_stores(session):
    empty = f"it_empty_{uuid.uuid4().hex[:8]}"
    create_keyspace(session, empty)
    try:
        assert admin.list_stores(session, empty) == []
    finally:
        session.execute(f"DROP KEYSPACE {empty}", execution_profile=DDL_PROFILE)


@pytest.mark.parametrize("store_type", ["partitioned-versioned", "global-versioned"])
def test_versioned_stores_through_every_admin_action(session, keyspace, store_name, store_type):
    spec = admin.create_store(session, keyspace, store_name, store_type, 2, {"ttl": 600})
    store = open_store(session, keyspace, store_name)
    for key, versions in {"a": [(1, 100), (2, 200)], "b": [(7, 150)]}.items():
        for value, at in versions:
            store.put(key, value, at)
    described = admin.describe_store(session, keyspace, store_name)
    assert described.spec == spec and described.table_options.default_time_to_live == 600
    assert "valid_to" in described.schema_cql
    if spec.store_type.partitioned:
        assert described.partition_stats.total == 3  # rows, i.e. versions: a twice, b once
    else:
        assert described.partition_stats is None
    assert admin.top_entries(session, keyspace, store_name, 5) == [("b", 7), ("a", 2)]  # latest values
    assert admin.alter_store(session, keyspace, store_name, {"ttl": 0}).default_time_to_live == 0
    admin.truncate_store(session, keyspace, store_name)
    assert list(store.all()) == []
    admin.drop_store(session, keyspace, store_name, store_name)
    assert registry.find(session, keyspace, store_name) is None


def test_a_key_value_store_is_created_with_ucs_unless_asked_for_the_seeds_lcs(session, keyspace, store_name):
    admin.create_store(session, keyspace, store_name, "global-kv")
    assert _table_options(session, keyspace, f"{store_name}_store")["compaction"]["class"].endswith(
        "UnifiedCompactionStrategy"
    )
    seed = f"{store_name}_seed"
    admin.create_store(session, keyspace, seed, "partitioned-kv", 2, {"compaction": "LeveledCompactionStrategy"})
    assert _table_options(session, keyspace, f"{seed}_store")["compaction"]["class"].endswith(
        "LeveledCompactionStrategy"
    )
