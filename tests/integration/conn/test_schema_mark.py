"""The schema mark the apply cache's plans compare (conn.cassandra.table_ttl_with_schema): a
table TTL set by CQL and removed again leaves the table at a mark no earlier read saw, so the
next plan trusts no file of a batch written meanwhile (apply_cache.CacheLedger.admits); a
schema change of any other table leaves the mark as it was, so the cache keeps serving."""

from __future__ import annotations

import uuid

from statestore.conn.cassandra import DDL_PROFILE, table_ttl_with_schema


def test_a_ttl_set_and_removed_by_cql_moves_the_mark_and_other_tables_changes_do_not(session, keyspace):
    table, other = f"ttl_{uuid.uuid4().hex[:10]}", f"other_{uuid.uuid4().hex[:10]}"

    def ddl(statement: str) -> None:
        session.execute(statement, execution_profile=DDL_PROFILE)

    ddl(f"CREATE TABLE {keyspace}.{table} (k int PRIMARY KEY, v int)")
    try:
        before = table_ttl_with_schema(session, keyspace, table)
        ddl(f"CREATE TABLE {keyspace}.{other} (k int PRIMARY KEY, v int)")
        ddl(f"ALTER TABLE {keyspace}.{other} WITH default_time_to_live = 30")
        ddl(f"DROP TABLE {keyspace}.{other}")
        unmoved = table_ttl_with_schema(session, keyspace, table)
        ddl(f"ALTER TABLE {keyspace}.{table} WITH default_time_to_live = 30")
        during = table_ttl_with_schema(session, keyspace, table)
        ddl(f"ALTER TABLE {keyspace}.{table} WITH default_time_to_live = 0")
        after = table_ttl_with_schema(session, keyspace, table)
        assert (before.ttl_s, unmoved.ttl_s, during.ttl_s, after.ttl_s) == (0, 0, 30, 0)
        # Another table created, altered and dropped: this table's mark is as it was.
        assert unmoved.schema_mark == before.schema_mark
        # The TTL is back as it was, the mark is not: a plan before and one after differ.
        assert after.schema_mark != before.schema_mark
        assert after.schema_mark != during.schema_mark != before.schema_mark
        missing = table_ttl_with_schema(session, keyspace, f"missing_{table}")
        assert missing.ttl_s is None and missing.schema_mark != before.schema_mark
    finally:
        ddl(f"DROP TABLE IF EXISTS {keyspace}.{table}")
        ddl(f"DROP TABLE IF EXISTS {keyspace}.{other}")
