"""Every CassandraStateStoreHook method on the real Cassandra, through an AIRFLOW_CONN_* connection."""

from __future__ import annotations

import json

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
import pytest
from statestore_airflow.hook import CassandraStateStoreHook

from statestore.core.errors import ConfirmationRequiredError, StoreNotFoundError, UnsupportedOperationError
from statestore.store.builder import open_store


@pytest.fixture
def hook(cassandra_config, monkeypatch) -> CassandraStateStoreHook:
    connection = {
        "conn_type": "statestore",
        "host": ",".join(cassandra_config.hosts),
        "port": cassandra_config.port,
        "schema": cassandra_config.keyspace,
        "extra": {"dml_consistency": "LOCAL_QUORUM", "ddl_consistency": "ALL", "local_dc": "datacenter1"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_STATESTORE_IT", json.dumps(connection))
    return CassandraStateStoreHook("statestore_it")


def test_manage_a_partitioned_store_through_the_hook(hook, keyspace, store_name):
    assert hook.keyspace == keyspace
    spec = hook.create_store(store_name, "partitioned-kv", 4, {"ttl": 0, "compaction": "LeveledCompactionStrategy"})
    assert spec.partitions == 4
    assert store_name in {s.spec.name for s in hook.list_stores()}

    open_store(hook.get_conn(), keyspace, store_name).put_all(
        [("apple", 3), ("apricot", 7), ("banana", 7), ("cherry", 1)]
    )
    assert hook.get(store_name, "apricot") == 7
    assert hook.get(store_name, "durian") is None
    assert hook.scan(store_name, prefix="ap") == [("apple", 3), ("apricot", 7)]
    assert hook.scan(store_name, lower="apricot", upper="banana") == [("apricot", 7), ("banana", 7)]
    assert hook.scan(store_name, upper="apricot") == [("apple", 3), ("apricot", 7)]
    assert hook.scan(store_name, limit=3) == [("apple", 3), ("apricot", 7), ("banana", 7)]
    assert hook.top_entries(store_name, 2) == [("apricot", 7), ("banana", 7)]

    described = hook.describe_store(store_name)
    assert described.partition_stats.total == 4 and len(described.partition_stats.entries) == 4
    assert described.table_options.default_time_to_live == 0

    assert hook.alter_store(store_name, {"ttl": 600}).default_time_to_live == 600
    assert hook.describe_store(store_name, count_partitions=False).table_options.default_time_to_live == 600

    hook.truncate_store(store_name)
    assert hook.scan(store_name) == []

    with pytest.raises(ConfirmationRequiredError):
        hook.drop_store(store_name, confirm="yes")
    hook.drop_store(store_name, confirm=store_name)
    with pytest.raises(StoreNotFoundError):
        hook.describe_store(store_name)


def test_a_global_store_through_the_hook(hook, keyspace, store_name):
    hook.create_store(store_name, "global-kv", value_codec="json")
    open_store(hook.get_conn(), keyspace, store_name).put("k", {"n": 1})
    assert hook.get(store_name, "k") == {"n": 1}
    assert hook.scan(store_name) == [("k", {"n": 1})]
    with pytest.raises(UnsupportedOperationError):
        hook.scan(store_name, prefix="k")
    assert hook.describe_store(store_name).partition_stats is None
    hook.drop_store(store_name, confirm=store_name)
