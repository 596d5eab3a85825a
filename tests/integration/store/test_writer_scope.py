"""The levels of a store's writers on the real Cassandra: by default (auto) entries and the
registry run at QUORUM and the store's lightweight transactions at SERIAL, as Cassandra's own
traces show, and a writer checks the keyspace's replication before it writes. A keyspace
replicated to a second data center cannot be made on the one-data-center stack (Cassandra 5
refuses an unknown data center's name): the refusal of LOCAL_ levels there, and what the
default levels prevent, are proven on a cluster with two data centers by
tests/integration/cluster/test_cluster_two_dc.py."""

from __future__ import annotations

import uuid

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.conn.cassandra import BOOKKEEPING_PROFILE, DDL_PROFILE, WriterLevels, check_writer_scope, session_for
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.store.book.lease import LEASE_TABLE, StoreLease, create_cql


def _traced(session, cql: str, params: tuple, profile) -> dict:
    result = session.execute(cql, params, execution_profile=profile, trace=True)
    return result.get_query_trace(max_wait_sec=10).parameters


def test_by_default_entries_run_at_quorum_and_the_stores_transactions_at_serial(session, keyspace, store_name):
    assert check_writer_scope(session, keyspace) == WriterLevels("QUORUM", "QUORUM", "SERIAL")
    session.execute(create_cql(keyspace), execution_profile=DDL_PROFILE)
    insert = f"INSERT INTO {keyspace}.{LEASE_TABLE} (store, holder) VALUES (%s, 'probe')"
    parameters = _traced(session, insert + " IF NOT EXISTS", (store_name,), BOOKKEEPING_PROFILE)
    assert (parameters["consistency_level"], parameters["serial_consistency_level"]) == ("QUORUM", "SERIAL")
    parameters = _traced(session, insert, (store_name,), EXEC_PROFILE_DEFAULT)
    assert parameters["consistency_level"] == "QUORUM", parameters


def test_local_levels_are_accepted_for_a_keyspace_in_one_data_center(store_name):
    keyspace = f"it_dc1_{uuid.uuid4().hex[:8]}"
    local = {"dml_consistency": "LOCAL_QUORUM", "bookkeeping_consistency": "LOCAL_QUORUM"}
    config = cfg.resolve(
        CassandraConfig, overrides={"keyspace": keyspace, "serial_consistency": "LOCAL_SERIAL"} | local
    )
    session = session_for(config)
    session.execute(
        f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}}",
        execution_profile=DDL_PROFILE,
    )
    try:
        assert check_writer_scope(session, keyspace) == WriterLevels("LOCAL_QUORUM", "LOCAL_QUORUM", "LOCAL_SERIAL")
        lease = StoreLease(session, keyspace, store_name, "/checkpoints/a", ttl_s=5)
        lease.acquire()
        lease.release()
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", execution_profile=DDL_PROFILE)
