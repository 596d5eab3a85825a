"""Expiry refuses a cutoff later than the wall clock (issue 28, item 3): a store whose stream
time is in the future (a record from a producer whose clock was far ahead, applied before the
stream dead-lettered such records) would otherwise lose every entry or segment. The refusal
comes before anything of any store named is deleted."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from statestore.core.model import EVERYTHING, StoreType
from statestore.core.names import validate_keyspace
from statestore.core.windows import WindowSpec
from statestore.store.book import registry
from statestore.store.book.registry import BatchPosition
from statestore.store.builder import StoreBuilder
from statestore.stream.position import now_micros
from tests.integration.maintenance.test_maintenance_audit import load_job
from tests.integration.maintenance.test_maintenance_expire import contents, seeded_store

DAY_MS = 86_400_000
MINUTE = 60_000


@pytest.fixture(autouse=True)
def _spark(spark):
    """The expire job runs Spark jobs in-process: share the session."""
    return spark


def _set_stream_time(session, keyspace: str, store: str, ms: int) -> None:
    """Test setup: the registry's stream time as a future record left it."""
    session.execute(
        f"UPDATE {validate_keyspace(keyspace)}.{registry.REGISTRY_TABLE} SET max_event_time = %s WHERE name = %s",
        (datetime.fromtimestamp(ms / 1000, UTC), store),
    )


def test_expiry_refuses_a_stream_time_cutoff_in_the_future_and_deletes_nothing(
    session, keyspace, store_name, tmp_path, capsys
):
    kv = seeded_store(session, keyspace, f"{store_name}_kv", StoreType.PARTITIONED_KV)
    windowing = WindowSpec(MINUTE, retention_ms=10 * MINUTE, segment_ms=2 * MINUTE)
    windows = StoreBuilder(session, store_name).with_keyspace(keyspace).partitioned_window_store(windowing, 3)
    windows = windows.create()
    for m in range(30):
        windows.put("mill", m + 1, m * MINUTE, stream_time_ms=None)
    # The window store's stream time is sane (30 minutes after the epoch): only the key-value
    # store's is ahead, and refusing it must keep the window store's segments too.
    registry.record_batch(
        session, windows.spec, BatchPosition(batch_id=0, write_ts=now_micros(), start=None, end=None), 30 * MINUTE
    )
    future = int(time.time() * 1000) + 10 * DAY_MS
    _set_stream_time(session, keyspace, kv.name, future)
    before = contents(session, kv)

    argv = ["--keyspace", keyspace, "--retention", "2d", "--report-dir", str(tmp_path)]
    assert load_job("expire_state").main([*argv, "--store", store_name, "--store", kv.name]) == 2
    err = capsys.readouterr().err
    assert kv.name in err and "in the future" in err and str(future) in err
    assert contents(session, kv) == before and len(before) == 610
    assert len(list(windows.raw_windows(EVERYTHING, 0, 2**62, stream_time_ms=None))) == 30


def test_expiry_refuses_a_window_store_whose_stream_time_is_in_the_future(
    session, keyspace, store_name, tmp_path, capsys
):
    windowing = WindowSpec(MINUTE, retention_ms=10 * MINUTE, segment_ms=2 * MINUTE)
    windows = StoreBuilder(session, store_name).with_keyspace(keyspace).partitioned_window_store(windowing, 3)
    windows = windows.create()
    now = int(time.time() * 1000) // MINUTE * MINUTE
    for m in range(30):
        windows.put("mill", m + 1, now - m * MINUTE, stream_time_ms=None)
    registry.record_batch(
        session, windows.spec, BatchPosition(batch_id=0, write_ts=now_micros(), start=None, end=None), now
    )
    _set_stream_time(session, keyspace, store_name, now + 50 * MINUTE)  # one record 50 min ahead

    argv = ["--keyspace", keyspace, "--store", store_name, "--report-dir", str(tmp_path)]
    assert load_job("expire_state").main(argv) == 2
    err = capsys.readouterr().err
    assert store_name in err and "in the future" in err
    assert len(list(windows.raw_windows(EVERYTHING, 0, 2**62, stream_time_ms=None))) == 30
