"""The serial consistency of fencing on the real Cassandra: by default (auto) the store's
lightweight transactions run at SERIAL, as Cassandra's own trace of one shows, and a writer
checks the keyspace's replication before it takes a lease. A keyspace replicated to a second
data center cannot be made on the one-data-center stack (Cassandra 5 refuses an unknown data
center's name): LOCAL_SERIAL's refusal there, and what SERIAL prevents, are proven on a cluster
with two data centers by tests/integration/cluster/test_cluster_two_dc.py."""

from __future__ import annotations

import uuid

from statestore.conn.cassandra import BOOKKEEPING_PROFILE, DDL_PROFILE, check_serial_scope, session_for
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.store.book.lease import LEASE_TABLE, StoreLease, create_cql


def test_by_default_the_stores_transactions_run_at_serial(session, keyspace, store_name):
    assert check_serial_scope(session, keyspace) == "SERIAL"
    session.execute(create_cql(keyspace), execution_profile=DDL_PROFILE)
    result = session.execute(
        f"INSERT INTO {keyspace}.{LEASE_TABLE} (store, holder) VALUES (%s, 'probe') IF NOT EXISTS",
        (store_name,),
        execution_profile=BOOKKEEPING_PROFILE,
        trace=True,
    )
    parameters = result.get_query_trace(max_wait_sec=10).parameters
    assert parameters["serial_consistency_level"] == "SERIAL", parameters


def test_local_serial_is_accepted_for_a_keyspace_in_one_data_center(store_name):
    keyspace = f"it_dc1_{uuid.uuid4().hex[:8]}"
    config = cfg.resolve(CassandraConfig, overrides={"keyspace": keyspace, "serial_consistency": "LOCAL_SERIAL"})
    local = session_for(config)
    local.execute(
        f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}}",
        execution_profile=DDL_PROFILE,
    )
    try:
        assert check_serial_scope(local, keyspace) == "LOCAL_SERIAL"
        lease = StoreLease(local, keyspace, store_name, "/checkpoints/a", ttl_s=5)
        lease.acquire()
        lease.release()
    finally:
        local.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", execution_profile=DDL_PROFILE)
