"""Which execution profile the registry's writes run on: registering and forgetting a store are
DML on the bookkeeping profile (LOCAL_QUORUM / serial), never the DDL profile (consistency ALL),
so a store can be created or dropped with one replica of three down."""

from __future__ import annotations

from types import SimpleNamespace

from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile

from statestore.conn.cassandra import BOOKKEEPING_PROFILE, DDL_PROFILE
from statestore.core.model import StoreSpec, StoreType
from statestore.store.book import registry


class _Session:
    """Records each statement's CQL and execution profile; every transaction applies."""

    def __init__(self, profiles=(EXEC_PROFILE_DEFAULT, DDL_PROFILE, BOOKKEEPING_PROFILE)):
        self.cluster = SimpleNamespace(
            profile_manager=SimpleNamespace(profiles={name: ExecutionProfile() for name in profiles})
        )
        self.calls: list[tuple[str, object]] = []

    def prepare(self, cql):
        return SimpleNamespace(cql=cql)

    def execute(self, statement, params=None, execution_profile=EXEC_PROFILE_DEFAULT):
        self.calls.append((getattr(statement, "cql", statement), execution_profile))
        return SimpleNamespace(one=lambda: SimpleNamespace(applied=True))


SPEC = StoreSpec("ks", "words", StoreType.PARTITIONED_KV, 4)


def test_registering_and_forgetting_a_store_run_on_the_bookkeeping_profile():
    session = _Session()
    assert registry.register(session, SPEC, "lines") == SPEC
    registry.unregister(session, "ks", "words")
    (insert, insert_profile), (delete, delete_profile) = session.calls
    assert "IF NOT EXISTS" in insert and insert_profile == BOOKKEEPING_PROFILE
    assert delete.startswith("DELETE") and delete_profile == BOOKKEEPING_PROFILE


def test_a_session_made_elsewhere_without_the_bookkeeping_profile_uses_its_default_one():
    session = _Session(profiles=(EXEC_PROFILE_DEFAULT, "my_ddl"))
    registry.register(session, SPEC, None)
    registry.unregister(session, "ks", "words")
    assert [profile for _, profile in session.calls] == [EXEC_PROFILE_DEFAULT, EXEC_PROFILE_DEFAULT]
