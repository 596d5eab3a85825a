"""Which consistency levels a store's writers run at (statestore.conn.cassandra.level_for), for
the keyspace's data centers: every read and write a writer decides on must overlap those of a
writer in any other data center. A LOCAL_ level is decided by one data center's replicas, and
replication to the others is asynchronous: at LOCAL_SERIAL two drivers, one per data center,
can both win the lease, the epoch and the progress updates; at LOCAL_QUORUM a writer restarted
in the other data center reads entries (and registry marks) older than the batches recorded.
The default of each level, auto, is QUORUM (SERIAL); an explicit LOCAL_ level is refused for a
keyspace in several data centers, with the way out, before a writer writes anything."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile

from statestore.conn.cassandra import (
    BOOKKEEPING_PROFILE,
    WriterLevels,
    build_cluster,
    check_writer_scope,
    data_centers_of,
    level_for,
    serial_level_for,
)
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig, StreamConfig
from statestore.core.errors import ConfigError
from statestore.maintenance.expire.entries import ExpireOptions, expire
from statestore.maintenance.shared.selection import TimeBasis
from statestore.stream.job import JobConfig, resolve_store

NTS = "org.apache.cassandra.locator.NetworkTopologyStrategy"
SIMPLE = "org.apache.cassandra.locator.SimpleStrategy"
TWO_DCS = {"class": NTS, "dc1": "3", "dc2": "3"}
ONE_DC = {"class": NTS, "dc1": "3"}


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


ONE, TWO = {"dc1"}, {"dc1", "dc2"}


@pytest.mark.parametrize(
    ("kind", "setting", "data_centers", "level"),
    [
        # auto: the levels that overlap across data centers, on one as on several
        ("entries", "AUTO", ONE, "QUORUM"),
        ("entries", "auto", TWO, "QUORUM"),
        ("bookkeeping", "AUTO", ONE, "QUORUM"),
        ("bookkeeping", "AUTO", TWO, "QUORUM"),
        ("serial", "AUTO", ONE, "SERIAL"),
        ("serial", "auto", TWO, "SERIAL"),
        # explicit levels that overlap across data centers
        ("entries", "QUORUM", TWO, "QUORUM"),
        ("entries", "EACH_QUORUM", TWO, "EACH_QUORUM"),
        ("entries", "ALL", TWO, "ALL"),
        ("bookkeeping", "QUORUM", TWO, "QUORUM"),
        ("serial", "SERIAL", TWO, "SERIAL"),
        # a LOCAL_ level where the keyspace has one data center (or none known)
        ("entries", "LOCAL_QUORUM", ONE, "LOCAL_QUORUM"),
        ("entries", "LOCAL_QUORUM", set(), "LOCAL_QUORUM"),
        ("entries", "LOCAL_ONE", ONE, "LOCAL_ONE"),
        ("bookkeeping", "LOCAL_QUORUM", ONE, "LOCAL_QUORUM"),
        ("serial", "LOCAL_SERIAL", ONE, "LOCAL_SERIAL"),
        ("serial", "LOCAL_SERIAL", set(), "LOCAL_SERIAL"),
        # ONE reads may miss the last write in any keyspace: CassandraConfig refuses it unless
        # --allow-weak-consistency accepted that (test_weak_consistency.py), not this rule
        ("entries", "ONE", TWO, "ONE"),
    ],
)
def test_the_level_a_writer_runs_at_for_the_keyspaces_data_centers(kind, setting, data_centers, level):
    assert level_for(kind, setting, "ks", data_centers) == level


@pytest.mark.parametrize(
    ("kind", "setting", "flag", "way_out"),
    [
        ("entries", "LOCAL_QUORUM", "--dml-consistency / STATESTORE_DML_CONSISTENCY", "QUORUM, EACH_QUORUM or ALL"),
        ("entries", "local_one", "--dml-consistency / STATESTORE_DML_CONSISTENCY", "QUORUM, EACH_QUORUM or ALL"),
        ("bookkeeping", "LOCAL_QUORUM", "--bookkeeping-consistency / STATESTORE_BOOKKEEPING_CONSISTENCY", "QUORUM"),
        ("bookkeeping", "LOCAL_ONE", "--bookkeeping-consistency / STATESTORE_BOOKKEEPING_CONSISTENCY", "QUORUM"),
        ("serial", "LOCAL_SERIAL", "--serial-consistency / STATESTORE_SERIAL_CONSISTENCY", "SERIAL"),
    ],
)
def test_a_local_level_on_a_keyspace_in_two_data_centers_is_refused_with_the_way_out(kind, setting, flag, way_out):
    with pytest.raises(ConfigError) as refused:
        level_for(kind, setting, "ks", TWO)
    message = str(refused.value)
    assert "keyspace 'ks' is replicated to 2 data centers (dc1, dc2)" in message
    assert f"is {setting.upper()}:" in message
    assert f"Use {way_out}" in message and "or auto (the default" in message and f"unset {flag}" in message


def test_the_entries_refusal_says_what_a_failover_would_count():
    with pytest.raises(ConfigError, match="restarted in another data center would read entries older than the batches"):
        level_for("entries", "LOCAL_QUORUM", "ks", TWO)
    with pytest.raises(ConfigError, match="writers in two data centers could both take the store"):
        serial_level_for("LOCAL_SERIAL", "ks", TWO)


def test_the_defaults_are_auto_and_the_sessions_profiles_run_at_quorum_and_serial():
    config = cfg.resolve(CassandraConfig, env={})
    assert (config.dml_consistency, config.bookkeeping_consistency, config.serial_consistency) == ("AUTO",) * 3
    profiles = build_cluster(config).profile_manager.profiles
    assert profiles[EXEC_PROFILE_DEFAULT].consistency_level == ConsistencyLevel.QUORUM
    assert profiles[BOOKKEEPING_PROFILE].consistency_level == ConsistencyLevel.QUORUM
    assert profiles[BOOKKEEPING_PROFILE].serial_consistency_level == ConsistencyLevel.SERIAL
    assert profiles[EXEC_PROFILE_DEFAULT].serial_consistency_level == ConsistencyLevel.SERIAL
    local = cfg.resolve(
        CassandraConfig,
        env={
            "STATESTORE_DML_CONSISTENCY": "local_quorum",
            "STATESTORE_BOOKKEEPING_CONSISTENCY": "LOCAL_QUORUM",
            "STATESTORE_SERIAL_CONSISTENCY": "local_serial",
        },
    )
    profiles = build_cluster(local).profile_manager.profiles
    assert profiles[EXEC_PROFILE_DEFAULT].consistency_level == ConsistencyLevel.LOCAL_QUORUM
    assert profiles[BOOKKEEPING_PROFILE].consistency_level == ConsistencyLevel.LOCAL_QUORUM
    assert profiles[BOOKKEEPING_PROFILE].serial_consistency_level == ConsistencyLevel.LOCAL_SERIAL


class _Session:
    """A session's profiles and the cluster's data centers; every statement is recorded, and
    system_schema answers for a keyspace with `replication`."""

    def __init__(self, replication, dcs=("dc1", "dc2"), entries=None, bookkeeping=None, serial=None):
        config = cfg.resolve(
            CassandraConfig,
            env={},
            overrides={"allow_weak_consistency": True}  # LOCAL_ONE may be tried
            | {
                key: value
                for key, value in (
                    ("dml_consistency", entries),
                    ("bookkeeping_consistency", bookkeeping),
                    ("serial_consistency", serial),
                )
                if value is not None
            },
        )
        hosts = [SimpleNamespace(datacenter=dc) for dc in dcs]
        self.cluster = SimpleNamespace(
            profile_manager=build_cluster(config).profile_manager, metadata=SimpleNamespace(all_hosts=lambda: hosts)
        )
        self.replication = replication
        self.statements: list[str] = []

    def execute(self, cql, params=None, **_):
        self.statements.append(cql)
        row = SimpleNamespace(keyspace_name="ks", replication=self.replication)
        return SimpleNamespace(one=lambda: row if cql.lstrip().startswith("SELECT") else None)

    def prepare(self, cql):
        raise AssertionError(f"nothing may be prepared before the check: {cql}")


def test_the_check_reads_the_keyspace_replication_and_the_sessions_levels():
    assert check_writer_scope(_Session(TWO_DCS), "ks") == WriterLevels("QUORUM", "QUORUM", "SERIAL")
    for local in ({"entries": "LOCAL_QUORUM"}, {"bookkeeping": "LOCAL_QUORUM"}, {"serial": "LOCAL_SERIAL"}):
        with pytest.raises(ConfigError, match=r"replicated to 2 data centers \(dc1, dc2\)"):
            check_writer_scope(_Session(TWO_DCS, **local), "ks")
    one = _Session(ONE_DC, entries="LOCAL_QUORUM", bookkeeping="LOCAL_QUORUM", serial="LOCAL_SERIAL")
    assert check_writer_scope(one, "ks") == WriterLevels("LOCAL_QUORUM", "LOCAL_QUORUM", "LOCAL_SERIAL")


def test_a_session_made_elsewhere_is_checked_at_its_default_profile():
    # No bookkeeping profile: registry and lease run on the default one (bookkeeping_profile).
    profiles = {EXEC_PROFILE_DEFAULT: ExecutionProfile(consistency_level=ConsistencyLevel.LOCAL_QUORUM)}
    session = _Session(TWO_DCS)
    session.cluster.profile_manager = SimpleNamespace(profiles=profiles)
    with pytest.raises(ConfigError, match="DML consistency"):
        check_writer_scope(session, "ks")


def test_the_stream_refuses_a_local_level_before_it_writes_anything():
    session = _Session(TWO_DCS, entries="LOCAL_QUORUM")
    job = JobConfig(
        stream=cfg.resolve(StreamConfig, env={}, overrides={"topic": "t", "store": "s", "checkpoint": "/tmp/cp"}),
        cassandra=cfg.resolve(CassandraConfig, env={}, overrides={"dml_consistency": "LOCAL_QUORUM", "keyspace": "ks"}),
        kafka=cfg.resolve(KafkaConfig, env={}),
    )
    with pytest.raises(ConfigError, match="DML consistency"):
        resolve_store(session, job)
    assert all(cql.lstrip().startswith("SELECT") for cql in session.statements), session.statements


def test_the_expire_job_refuses_a_local_level_before_it_deletes_anything():
    session = _Session(TWO_DCS, entries="LOCAL_ONE")
    config = cfg.resolve(
        CassandraConfig, env={}, overrides={"dml_consistency": "LOCAL_ONE", "allow_weak_consistency": True}
    )
    with pytest.raises(ConfigError, match="is LOCAL_ONE"):
        expire(None, session, config, ["s"], ExpireOptions(TimeBasis.PROCESSING, None))
    assert all(cql.lstrip().startswith("SELECT") for cql in session.statements), session.statements
