"""The schema versions the apply cache's plans compare (conn.cassandra.table_ttl_with_schema):
a table TTL set by CQL and removed again leaves the schema at versions no earlier read saw, so
the next plan trusts no file of a batch written meanwhile (apply_cache.CacheLedger.admits)."""

from __future__ import annotations

import uuid

from statestore.conn.cassandra import DDL_PROFILE, table_ttl_with_schema


def test_a_ttl_set_and_removed_by_cql_leaves_other_schema_versions(session, keyspace):
    table = f"ttl_{uuid.uuid4().hex[:10]}"
    session.execute(f"CREATE TABLE {keyspace}.{table} (k int PRIMARY KEY, v int)", execution_profile=DDL_PROFILE)
    try:
        before = table_ttl_with_schema(session, keyspace, table)
        session.execute(f"ALTER TABLE {keyspace}.{table} WITH default_time_to_live = 30", execution_profile=DDL_PROFILE)
        during = table_ttl_with_schema(session, keyspace, table)
        session.execute(f"ALTER TABLE {keyspace}.{table} WITH default_time_to_live = 0", execution_profile=DDL_PROFILE)
        after = table_ttl_with_schema(session, keyspace, table)
        assert (before.ttl_s, during.ttl_s, after.ttl_s) == (0, 30, 0)
        assert before.schema_versions and during.schema_versions and after.schema_versions
        # The TTL is back as it was, the schema versions are not: a plan before and one after differ.
        assert after.schema_versions != before.schema_versions
        assert after.schema_versions != during.schema_versions != before.schema_versions
        assert table_ttl_with_schema(session, keyspace, f"missing_{table}").ttl_s is None
    finally:
        session.execute(f"DROP TABLE IF EXISTS {keyspace}.{table}", execution_profile=DDL_PROFILE)
