"""The expire job and a store's own retention: a key-value store that has one expires by it
(with no --retention, and over a --retention given for the run), reclaiming exactly what its
readers already hide; a store without one still needs --retention."""

from __future__ import annotations

import json

import pytest

from statestore.core.model import StoreType
from statestore.store.builder import open_store
from statestore.store.retention import set_retention
from tests.integration.maintenance.test_maintenance_audit import load_job
from tests.integration.maintenance.test_maintenance_expire import DAY_MS, STREAM_TIME_MS, contents, seeded_store

KEPT = sorted([f"new{i}" for i in range(20)] + [f"undated{i}" for i in range(3)])


@pytest.fixture(autouse=True)
def _spark(spark):
    """The expire job runs Spark in-process: share the session."""
    return spark


def test_a_store_with_a_retention_expires_by_it(session, keyspace, store_name, tmp_path, capsys):
    own = seeded_store(session, keyspace, f"{store_name}_own", StoreType.PARTITIONED_KV, old=30, new=20, undated=3)
    bare = seeded_store(session, keyspace, f"{store_name}_bare", StoreType.GLOBAL_KV, old=30, new=20, undated=3)
    set_retention(session, keyspace, own.name, 2 * DAY_MS)
    # Before the job: the old entries (3 days behind the stream time) are already hidden.
    assert sorted(k for k, _ in open_store(session, keyspace, own.name).all()) == KEPT

    base = ["--keyspace", keyspace, "--report-dir", str(tmp_path)]
    assert load_job("expire_state").main([*base, "--store", own.name]) == 0
    report = json.loads((tmp_path / "expire_state.json").read_text())["stores"][0]
    assert (report["retention_ms"], report["cutoff_ms"], report["removed"]) == (
        2 * DAY_MS,
        STREAM_TIME_MS - 2 * DAY_MS,
        30,
    )
    assert sorted(contents(session, own)) == KEPT

    # A store without a retention of its own still needs one for the run.
    assert load_job("expire_state").main([*base, "--store", bare.name]) == 2
    assert "without a retention of its own" in capsys.readouterr().err
    # Given one, the run's retention applies to it, and never over a store's own.
    reseeded = seeded_store(
        session, keyspace, f"{store_name}_own2", StoreType.PARTITIONED_KV, old=30, new=20, undated=3
    )
    set_retention(session, keyspace, reseeded.name, 2 * DAY_MS)
    argv = [*base, "--retention", "5d", "--store", reseeded.name, "--store", bare.name]
    assert load_job("expire_state").main(argv) == 0
    by_store = {r["store"]: r for r in json.loads((tmp_path / "expire_state.json").read_text())["stores"]}
    assert (by_store[reseeded.name]["retention_ms"], by_store[reseeded.name]["removed"]) == (2 * DAY_MS, 30)
    assert (by_store[bare.name]["retention_ms"], by_store[bare.name]["removed"]) == (5 * DAY_MS, 0)
