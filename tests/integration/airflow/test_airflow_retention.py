"""A store's retention through Airflow: the hook sets it at creation and later, and the
state_store_admin DAG's `create` and `set_retention` actions (dag.test()) do the same; a bad
retention fails the task at once, changing nothing."""

from __future__ import annotations

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
import pytest

from statestore.core.errors import ConfigError
from statestore.store.book import registry
from tests.integration.airflow.test_airflow_dags import _admin, connections, dags  # noqa: F401 - fixtures
from tests.integration.airflow.test_airflow_hook import hook  # noqa: F401 - a fixture

DAY = 86_400_000


def test_the_hook_sets_a_retention_at_creation_and_later(hook, session, keyspace, store_name):  # noqa: F811
    spec = hook.create_store(store_name, "partitioned-kv", 2, retention="7d")
    assert spec.retention_ms == 7 * DAY
    assert hook.set_retention(store_name, "12h").retention_ms == 12 * 3_600_000
    assert hook.set_retention(store_name, 60_000).retention_ms == 60_000
    assert hook.describe_store(store_name, count_partitions=False).as_dict()["retention_ms"] == 60_000
    assert hook.set_retention(store_name, "none").retention_ms is None
    with pytest.raises(ConfigError, match="retention"):
        hook.set_retention(store_name, "soon")
    with pytest.raises(ConfigError, match="positive"):
        hook.create_store(store_name + "_x", "global-kv", retention=0)
    assert registry.find(session, keyspace, store_name + "_x") is None  # refused before anything was made
    assert registry.lookup(session, keyspace, store_name).retention_ms is None


def test_the_admin_dag_creates_with_a_retention_and_sets_it(dags, connections, session, keyspace, store_name):  # noqa: F811
    state, created = _admin(dags, action="create", store=store_name, partitions=2, retention="7d")
    assert state == "success" and created["retention_ms"] == 7 * DAY

    state, changed = _admin(dags, action="set_retention", store=store_name, retention="1d")
    assert state == "success" and changed["retention_ms"] == DAY
    assert registry.lookup(session, keyspace, store_name).retention_ms == DAY

    state, _ = _admin(dags, action="set_retention", store=store_name + "_none", retention="2d")  # no such store
    assert state == "failed"
    state, removed = _admin(dags, action="set_retention", store=store_name, retention="none")
    assert state == "success" and removed["retention_ms"] is None
