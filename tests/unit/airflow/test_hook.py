"""CassandraStateStoreHook: Airflow connection -> CassandraConfig -> driver Cluster (no I/O)."""

from __future__ import annotations

import json

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
import pytest
from airflow.sdk import Connection
from cassandra.cluster import EXEC_PROFILE_DEFAULT
from cassandra.policies import TokenAwarePolicy
from statestore_airflow.hook import CassandraStateStoreHook, connection_config

from statestore.conn.cassandra import DDL_PROFILE, build_cluster
from statestore.core.errors import ConfigError, InvalidNameError


def _conn(**fields) -> Connection:
    return Connection(conn_id="stores", conn_type="statestore", **fields)


def test_every_field_and_extra_maps_to_the_config(tmp_path):
    ca = tmp_path / "ca.pem"
    conn = _conn(
        host="c1.example, c2.example",
        port=19042,
        login="app",
        password="s3cret-password",
        schema="analytics",
        extra=json.dumps(
            {
                "ssl": True,
                "ssl_ca": str(ca),
                "ssl_cert": "/etc/certs/client.pem",
                "ssl_key": "/etc/certs/client.key",
                "check_hostname": "false",
                "dml_consistency": "local_one",
                "allow_weak_consistency": True,  # LOCAL_ONE is refused without it
                "ddl_consistency": "QUORUM",
                "local_dc": "eu-west",
                "protocol_version": 4,
                "request_timeout": "30",
            }
        ),
    )
    config = connection_config(conn)
    assert config.hosts == ("c1.example", "c2.example")
    assert (config.port, config.username, config.password, config.keyspace) == (
        19042,
        "app",
        "s3cret-password",
        "analytics",
    )
    assert config.ssl is True and config.ssl_check_hostname is False
    assert (config.ssl_ca_file, config.ssl_cert_file, config.ssl_key_file) == (
        str(ca),
        "/etc/certs/client.pem",
        "/etc/certs/client.key",
    )
    assert (config.dml_consistency, config.ddl_consistency) == ("LOCAL_ONE", "QUORUM")
    assert config.allow_weak_consistency is True
    assert (config.local_dc, config.protocol_version, config.request_timeout_s) == ("eu-west", 4, 30.0)
    assert "s3cret-password" not in repr(config)


def test_defaults_come_from_the_library_not_the_worker_environment(monkeypatch):
    monkeypatch.setenv("STATESTORE_CASSANDRA_PORT", "1111")
    monkeypatch.setenv("STATESTORE_KEYSPACE", "from_env")
    config = connection_config(_conn(host="db"))
    assert (config.hosts, config.port, config.keyspace) == (("db",), 9042, "wordcount")
    assert (config.username, config.password, config.ssl) == (None, None, False)
    assert (config.dml_consistency, config.ddl_consistency) == ("AUTO", "ALL")
    assert connection_config(_conn(host="db", schema="ks1"), keyspace="ks2").keyspace == "ks2"


def test_a_uri_connection_with_several_hosts():
    conn = Connection(conn_id="u", uri="cassandra://app:p%40ss@h1,h2:9142/stores?ssl=true&local_dc=dc2")
    config = connection_config(conn)
    assert (config.hosts, config.port, config.keyspace, config.password) == (("h1", "h2"), 9142, "stores", "p@ss")
    assert config.ssl and config.local_dc == "dc2"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"extra": json.dumps({"ssl_options": {"ca_certs": "x"}})}, "unknown extra 'ssl_options'; use ssl, ssl_ca"),
        ({"extra": json.dumps({"dml_consistency": "MOST"})}, "'MOST' is not valid: use one of ONE"),
        ({"extra": json.dumps({"ssl": "maybe"})}, "'maybe' is not valid: use true or false"),
        ({"port": 70000}, "'70000' is not valid: a TCP port is 1-65535"),
        ({"schema": "Bad-Keyspace"}, "invalid keyspace 'Bad-Keyspace'"),
    ],
)
def test_bad_connections_are_refused_with_the_connection_named(fields, message):
    with pytest.raises(ConfigError, match=message) as refused:
        connection_config(_conn(host="db", **fields))
    assert "connection 'stores'" in str(refused.value)


def test_the_password_never_appears_in_an_error():
    conn = _conn(host="db", password="topsecret-pw", extra=json.dumps({"protocol_version": "x"}))
    with pytest.raises(ConfigError) as refused:
        connection_config(conn)
    assert "topsecret-pw" not in str(refused.value)


def test_the_cluster_has_dml_and_ddl_profiles_and_token_aware_routing():
    config = connection_config(
        _conn(host="127.0.0.1", extra=json.dumps({"dml_consistency": "QUORUM", "local_dc": "dc9"}))
    )
    cluster = build_cluster(config)
    profiles = cluster.profile_manager.profiles
    assert profiles[EXEC_PROFILE_DEFAULT].consistency_level == 4  # QUORUM
    assert profiles[DDL_PROFILE].consistency_level == 5  # ALL
    policy = profiles[EXEC_PROFILE_DEFAULT].load_balancing_policy
    assert isinstance(policy, TokenAwarePolicy) and policy._child_policy.local_dc == "dc9"


def test_the_hook_looks_nothing_up_until_used(monkeypatch):
    looked_up = []
    monkeypatch.setattr(CassandraStateStoreHook, "get_connection", classmethod(lambda cls, i: looked_up.append(i)))
    hook = CassandraStateStoreHook("some_conn", keyspace="ks")
    assert looked_up == [] and hook.cassandra_conn_id == "some_conn"
    with pytest.raises(InvalidNameError, match="invalid keyspace"):
        CassandraStateStoreHook(keyspace="Not Valid")
