"""Which serial consistency fences a store's writers (statestore.conn.cassandra): a keyspace
replicated to several data centers needs SERIAL (LOCAL_SERIAL would let one driver per data
center win the lease, the epoch and the progress updates). The default, auto, is SERIAL; an
explicit LOCAL_SERIAL is refused for such a keyspace, with the way out."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile

from statestore.conn.cassandra import (
    BOOKKEEPING_PROFILE,
    build_cluster,
    check_serial_scope,
    data_centers_of,
    serial_level_for,
)
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError

NTS = "org.apache.cassandra.locator.NetworkTopologyStrategy"
SIMPLE = "org.apache.cassandra.locator.SimpleStrategy"


@pytest.mark.parametrize(
    ("replication", "cluster_dcs", "expected"),
    [
        ({"class": NTS, "dc1": "3"}, {"dc1", "dc2"}, {"dc1"}),
        ({"class": NTS, "dc1": "3", "dc2": "3"}, {"dc1", "dc2"}, {"dc1", "dc2"}),
        ({"class": NTS, "dc1": "3", "dc2": "0"}, {"dc1", "dc2"}, {"dc1"}),  # no replica in dc2
        ({"class": SIMPLE, "replication_factor": "3"}, {"dc1"}, {"dc1"}),
        # SimpleStrategy places replicas around the ring, whatever their data center.
        ({"class": SIMPLE, "replication_factor": "3"}, {"dc1", "dc2"}, {"dc1", "dc2"}),
    ],
)
def test_the_data_centers_a_keyspace_spans(replication, cluster_dcs, expected):
    assert data_centers_of(replication, cluster_dcs) == expected


@pytest.mark.parametrize(
    ("setting", "data_centers", "level"),
    [
        ("AUTO", {"dc1"}, "SERIAL"),
        ("auto", {"dc1", "dc2"}, "SERIAL"),
        ("SERIAL", {"dc1", "dc2"}, "SERIAL"),
        ("LOCAL_SERIAL", {"dc1"}, "LOCAL_SERIAL"),
        ("LOCAL_SERIAL", set(), "LOCAL_SERIAL"),
    ],
)
def test_the_serial_level_that_fences_a_keyspace(setting, data_centers, level):
    assert serial_level_for(setting, "ks", data_centers) == level


def test_local_serial_on_a_keyspace_in_two_data_centers_is_refused_with_the_way_out():
    refused = r"keyspace 'ks' is replicated to 2 data centers \(dc1, dc2\).*SERIAL or auto"
    with pytest.raises(ConfigError, match=refused):
        serial_level_for("LOCAL_SERIAL", "ks", {"dc1", "dc2"})


def test_the_default_is_auto_and_the_sessions_transactions_run_at_serial():
    config = cfg.resolve(CassandraConfig, env={})
    assert config.serial_consistency == "AUTO"
    profiles = build_cluster(config).profile_manager.profiles
    assert profiles[BOOKKEEPING_PROFILE].serial_consistency_level == ConsistencyLevel.SERIAL
    assert profiles[EXEC_PROFILE_DEFAULT].serial_consistency_level == ConsistencyLevel.SERIAL
    local = cfg.resolve(CassandraConfig, env={"STATESTORE_SERIAL_CONSISTENCY": "local_serial"})
    assert build_cluster(local).profile_manager.profiles[BOOKKEEPING_PROFILE].serial_consistency_level == (
        ConsistencyLevel.LOCAL_SERIAL
    )


def _session(serial, replication, dcs):
    profiles = {BOOKKEEPING_PROFILE: ExecutionProfile(serial_consistency_level=serial)}
    hosts = [SimpleNamespace(datacenter=dc) for dc in dcs]
    cluster = SimpleNamespace(
        profile_manager=SimpleNamespace(profiles=profiles), metadata=SimpleNamespace(all_hosts=lambda: hosts)
    )
    row = SimpleNamespace(replication=replication)
    return SimpleNamespace(cluster=cluster, execute=lambda cql, params: SimpleNamespace(one=lambda: row))


def test_the_check_reads_the_keyspace_replication_and_the_sessions_level():
    two = {"class": NTS, "dc1": "3", "dc2": "3"}
    assert check_serial_scope(_session(ConsistencyLevel.SERIAL, two, ["dc1", "dc2"]), "ks") == "SERIAL"
    with pytest.raises(ConfigError, match="LOCAL_SERIAL"):
        check_serial_scope(_session(ConsistencyLevel.LOCAL_SERIAL, two, ["dc1", "dc2"]), "ks")
    one = {"class": NTS, "dc1": "3"}
    assert check_serial_scope(_session(ConsistencyLevel.LOCAL_SERIAL, one, ["dc1", "dc2"]), "ks") == "LOCAL_SERIAL"
