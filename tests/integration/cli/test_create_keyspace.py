"""`statestore create-keyspace` against the real single-node stack: it warns on stderr when the
replication does not fit the nodes the driver sees, and says nothing when it does."""

from __future__ import annotations

import uuid

from statestore.cli.main import main
from statestore.conn.cassandra import DDL_PROFILE


def test_rf_1_on_the_one_node_stack_says_nothing(capsys, session):
    name = f"it_ks_{uuid.uuid4().hex[:8]}"
    try:
        assert main(["create-keyspace", name]) == 0
        out, err = capsys.readouterr()
        assert f"keyspace {name} ready" in out
        assert err == ""
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {name}", execution_profile=DDL_PROFILE, timeout=60)


def test_rf_2_on_the_one_node_stack_is_warned_about(capsys, session):
    name = f"it_ks_{uuid.uuid4().hex[:8]}"
    try:
        assert main(["create-keyspace", name, "--replication-factor", "2"]) == 0
        err = capsys.readouterr().err
        assert err.startswith("warning: keyspace") and "replication factor 2" in err and "1 node" in err
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {name}", execution_profile=DDL_PROFILE, timeout=60)
