"""A store whose table is gone (dropped by hand, or by a test) costs the scrape its entries
estimate, not the whole /metrics answer (statestore.http.metrics.entries_estimate)."""

from __future__ import annotations

import uuid

import pytest

from statestore.core.model import StoreSpec, StoreType
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.http.metrics import entries_estimate
from statestore.store.provision import provision_store

KINDS = {
    "key-value": (StoreType.PARTITIONED_KV, None),
    "window": (StoreType.PARTITIONED_WINDOW, WindowSpec(60_000)),
    "session": (StoreType.PARTITIONED_SESSION, SessionSpec(30_000)),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_store_whose_table_is_gone_has_no_estimate_and_raises_nothing(session, keyspace, kind):
    """Window and session stores count their rows (None when the table is gone); key-value
    stores read Cassandra's size estimates, which say nothing (0) of a dropped table."""
    store_type, windowing = KINDS[kind]
    spec = StoreSpec(keyspace, f"g{uuid.uuid4().hex[:12]}", store_type, 4, windowing=windowing)
    spec = provision_store(session, spec)
    try:
        assert entries_estimate(session, spec) is not None
        session.execute(f"DROP TABLE {keyspace}.{spec.table}")
        assert entries_estimate(session, spec) in (None, 0)
    finally:
        session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", (spec.name,))
