"""The maintenance plan and a store's own retention (pure): a key-value store that carries one
is expired even when the DAG's `retention` param is empty; the others still need the param."""

from __future__ import annotations

from statestore.core.model import StoreSpec, StoreType
from statestore.maintenance.shared.coverage import EXPIRE, StoreFacts, plan_maintenance
from statestore.store.book.registry import StoreProgress


def _facts(name: str, retention_ms: int | None) -> StoreFacts:
    spec = StoreSpec("ks", name, StoreType.PARTITIONED_KV, 2, retention_ms=retention_ms)
    progress = StoreProgress(1, None, object(), None, None, 0, None, None, None, None, None)
    return StoreFacts.of(spec, progress, None)


def test_a_store_with_its_own_retention_is_expired_without_the_param():
    plan = plan_maintenance([_facts("kept", 86_400_000), _facts("plain", None)], [], retention_set=False)
    assert plan.stores[EXPIRE] == ("kept",)
    assert {s.store: s.reason for s in plan.skipped if s.job == EXPIRE} == {
        "plain": "no retention, neither the store's own nor the DAG's `retention` param: nothing is expired by default"
    }
