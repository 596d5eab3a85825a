"""Which stores each scheduled maintenance job covers, and why the others are left out (pure)."""

from __future__ import annotations

import pytest

from statestore.core.errors import ConfigError, StoreNotFoundError
from statestore.core.model import StoreType
from statestore.maintenance.shared.coverage import AUDIT, COMPACT, EXPIRE, VALIDATE, StoreFacts, plan_maintenance
from statestore.maintenance.shared.selection import TimeBasis


def facts(name, store_type=StoreType.PARTITIONED_KV, codecs=("string", "long"), streamed=True, writer=None, json=True):
    return StoreFacts(
        name,
        store_type,
        *codecs,
        has_stream_time=streamed,
        has_batches=streamed,
        writer=writer,
        input_recomputable=json if codecs[1].startswith("aggregate:") else None,
    )


STORES = [
    facts("counts"),
    facts("global_counts", StoreType.GLOBAL_KV),
    facts("history", StoreType.PARTITIONED_VERSIONED),
    facts("profiles", codecs=("string", "json")),
    facts("fresh", streamed=False),
    facts("live", writer="host:42:abcd"),
]


def reasons(plan, job):
    return {s.store: s.reason for s in plan.skipped if s.job == job}


def test_every_store_is_audited_and_compacted_and_each_job_runs_in_name_order():
    plan = plan_maintenance(STORES, retention_set=True)
    everything = tuple(sorted(s.name for s in STORES))
    assert plan.stores[AUDIT] == plan.stores[COMPACT] == everything
    assert list(plan.stores) == [EXPIRE, COMPACT, AUDIT, VALIDATE]


def test_expiry_covers_key_value_stores_with_a_stream_time():
    plan = plan_maintenance(STORES, retention_set=True, basis=TimeBasis.STREAM)
    assert plan.stores[EXPIRE] == ("counts", "global_counts", "live", "profiles")
    skipped = reasons(plan, EXPIRE)
    assert set(skipped) == {"history", "fresh"}
    assert "history retention" in skipped["history"] and "basis=processing" in skipped["fresh"]


def test_processing_time_expiry_needs_no_stream_time():
    plan = plan_maintenance(STORES, retention_set=True, basis=TimeBasis.PROCESSING)
    assert "fresh" in plan.stores[EXPIRE] and "history" not in plan.stores[EXPIRE]


def test_without_a_retention_nothing_is_expired_and_every_store_says_why():
    plan = plan_maintenance(STORES, retention_set=False)
    assert plan.stores[EXPIRE] == ()
    assert set(reasons(plan, EXPIRE)) == {s.name for s in STORES}
    assert all("no retention" in r for r in reasons(plan, EXPIRE).values())


def test_validation_covers_streamed_word_count_stores_at_rest():
    plan = plan_maintenance(STORES, retention_set=False)
    assert plan.stores[VALIDATE] == ("counts", "global_counts")
    skipped = reasons(plan, VALIDATE)
    assert "word-count" in skipped["history"] and "word-count" in skipped["profiles"]
    assert "no stream" in skipped["fresh"]
    assert "host:42:abcd" in skipped["live"]


def test_requested_stores_limit_every_job_and_unknown_ones_are_refused():
    plan = plan_maintenance(STORES, ["live", "counts"], retention_set=True)
    assert plan.stores[AUDIT] == ("counts", "live") and plan.stores[VALIDATE] == ("counts",)
    with pytest.raises(StoreNotFoundError, match=r"nope.*statestore stores"):
        plan_maintenance(STORES, ["counts", "nope"], retention_set=True)


def test_the_plan_serializes_for_xcom():
    plan = plan_maintenance([facts("counts"), facts("fresh", streamed=False)], retention_set=True).as_dict()
    assert plan["stores"][EXPIRE] == ["counts"]
    assert {"job": EXPIRE, "store": "fresh", "reason": plan["skipped"][0]["reason"]} in plan["skipped"]


def test_window_stores_expire_by_their_own_retention_once_they_have_a_stream_time():
    windows = facts("per_minute", StoreType.PARTITIONED_WINDOW)
    unstreamed = facts("per_hour", StoreType.PARTITIONED_WINDOW, streamed=False)
    plan = plan_maintenance([*STORES, windows, unstreamed], retention_set=False)
    assert plan.stores[EXPIRE] == ("per_minute",)  # no retention set: only the window store
    assert reasons(plan, EXPIRE)["per_hour"].startswith("window store without a stream time")
    assert {"per_minute", "per_hour"} <= set(plan.stores[AUDIT]) & set(plan.stores[COMPACT])
    # Validation recounts window and session stores like key-value ones, once a stream fed them.
    assert "per_minute" in plan.stores[VALIDATE]
    assert reasons(plan, VALIDATE)["per_hour"].startswith("no stream has applied a batch")


def test_jobs_asked_for_run_as_planned_and_the_others_name_every_store_they_leave_out():
    plan = plan_maintenance(STORES, retention_set=True, jobs=[VALIDATE])
    assert plan.stores[VALIDATE] == plan_maintenance(STORES, retention_set=True).stores[VALIDATE]
    for job in (EXPIRE, COMPACT, AUDIT):
        assert plan.stores[job] == ()
        assert reasons(plan, job) == {s.name: "not among the run's `jobs`" for s in STORES}
    assert plan_maintenance(STORES, retention_set=True, jobs=[]).stores[AUDIT] == tuple(sorted(s.name for s in STORES))
    with pytest.raises(ConfigError, match=r"no maintenance job named vacuum; the jobs are expire_state"):
        plan_maintenance(STORES, retention_set=True, jobs=["vacuum", AUDIT])


def test_validation_covers_streamed_aggregate_stores_at_rest():
    measures = ("string", "aggregate:n=count(), total=sum_int(amount)")
    stores = [facts("spend", codecs=measures), facts("spend_live", codecs=measures, writer="host:1:ab")]
    plan = plan_maintenance([*stores, facts("spend_new", codecs=measures, streamed=False)], retention_set=False)
    assert plan.stores[VALIDATE] == ("spend",)
    assert set(reasons(plan, VALIDATE)) == {"spend_live", "spend_new"}


def test_validation_skips_aggregate_stores_a_users_own_query_feeds():
    measures = ("string", "aggregate:n=count(), total=sum_int(amount)")
    plan = plan_maintenance(
        [facts("spend", codecs=measures), facts("own", codecs=measures, json=False)], retention_set=False
    )
    assert plan.stores[VALIDATE] == ("spend",)
    assert "own query" in reasons(plan, VALIDATE)["own"]


def test_validation_covers_window_and_session_aggregate_stores():
    measures = ("string", "aggregate:n=count(), total=sum_int(amount)")
    plan = plan_maintenance(
        [
            facts("spend_per_minute", StoreType.PARTITIONED_WINDOW, codecs=measures),
            facts("spend_per_visit", StoreType.PARTITIONED_SESSION, codecs=measures),
        ],
        retention_set=False,
    )
    assert plan.stores[VALIDATE] == ("spend_per_minute", "spend_per_visit")
    assert "spend_per_visit" not in reasons(plan, VALIDATE)
