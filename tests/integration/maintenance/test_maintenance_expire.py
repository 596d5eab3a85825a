"""Expiry on the real stack: old entries go, new ones stay, and an update racing the delete wins."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from statestore.core import config as cfg
from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import EVERYTHING, Entry, StoreSpec, StoreType, WindowedEntry
from statestore.core.windows import WindowSpec
from statestore.maintenance.expire.entries import ExpireOptions, expire_range
from statestore.maintenance.shared.nodetool import Nodetool, NodetoolConfig
from statestore.maintenance.shared.scan import shape_of, token_splits
from statestore.maintenance.shared.selection import Cutoff, TimeBasis
from statestore.store.book import history, registry
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.store.builder import StoreBuilder
from statestore.store.provision import provision_store
from statestore.store.tables import table_for
from statestore.stream.position import now_micros
from tests.integration.maintenance.test_maintenance_audit import load_job

DAY_MS = 86_400_000
STREAM_TIME_MS = 1_750_000_000_000  # the largest event time the stream applied


def seeded_store(session, keyspace, name, store_type, old=300, new=300, undated=10, write_ts=None, subpartitions=1):
    """A store whose stream time is STREAM_TIME_MS, with `old` entries 3 days behind it, `new`
    entries 1 hour behind and `undated` entries without an event time."""
    spec = provision_store(session, StoreSpec(keyspace, name, store_type, 4, subpartitions=subpartitions))
    table = table_for(spec)
    entries = [Entry(f"old{i}".encode(), encode_long(i + 1), 1, STREAM_TIME_MS - 3 * DAY_MS) for i in range(old)]
    entries += [Entry(f"new{i}".encode(), encode_long(i + 1), 1, STREAM_TIME_MS - 3_600_000) for i in range(new)]
    entries += [Entry(f"undated{i}".encode(), encode_long(1), 1, None) for i in range(undated)]
    table.write_entries(session, entries, 64, write_ts or now_micros())
    registry.record_batch(
        session,
        spec,
        BatchPosition(batch_id=1, write_ts=now_micros(), start=None, end=KafkaOffsets.parse('{"t":{"0":1}}')),
        STREAM_TIME_MS,
    )
    return spec


def contents(session, spec) -> dict[str, int]:
    return {e.key.decode(): decode_long(e.value) for e in table_for(spec).scan_unordered(session)}


def test_stream_time_expiry_removes_exactly_the_old_entries(session, keyspace, store_name, tmp_path):
    specs = [
        seeded_store(session, keyspace, f"{store_name}_p", StoreType.PARTITIONED_KV),
        seeded_store(session, keyspace, f"{store_name}_g", StoreType.GLOBAL_KV),
        seeded_store(session, keyspace, f"{store_name}_s", StoreType.PARTITIONED_KV, subpartitions=8),
    ]
    argv = ["--keyspace", keyspace, "--report-dir", str(tmp_path), "--retention", "2d"]
    began_us = now_micros()
    assert load_job("expire_state").main([*argv, *(a for s in specs for a in ("--store", s.name))]) == 0
    for spec in specs:  # the deletes are announced as over, for a stream's apply cache
        assert registry.progress(session, keyspace, spec.name).outside_writes >= began_us
    report = json.loads((tmp_path / "expire_state.json").read_text())
    for spec, result in zip(specs, report["stores"], strict=True):
        left = contents(session, spec)
        assert sorted(left) == sorted([f"new{i}" for i in range(300)] + [f"undated{i}" for i in range(10)])
        assert (result["scanned"], result["removed"], result["kept"], result["undated"]) == (610, 300, 310, 10)
        assert result["cutoff_ms"] == STREAM_TIME_MS - 2 * DAY_MS
        assert len(result["removed_sample"]) == 20 and all(k.startswith("old") for k in result["removed_sample"])
        # The cutoff is on record for validation.
        assert history.expired_before(session, keyspace, spec.name) == STREAM_TIME_MS - 2 * DAY_MS
    assert "removed" in (tmp_path / "expire_state.md").read_text()


def test_an_update_between_selection_and_delete_survives(session, keyspace, store_name):
    spec = seeded_store(session, keyspace, store_name, StoreType.PARTITIONED_KV, new=0, undated=0)
    table = table_for(spec)
    shape = shape_of(session, spec)
    raced: list[bytes] = []

    def update_first_picks(picks: list[tuple]) -> None:
        # The stream applies a batch after expiry read these entries and before it deletes
        # them: new counts, a fresh event time, a write timestamp above every earlier one.
        keys = [pick[1] for pick in picks[: len(picks) // 2]]
        table.write_entries(session, [Entry(k, encode_long(1000), 2, STREAM_TIME_MS) for k in keys], 16, now_micros())
        raced.extend(keys)

    options = ExpireOptions(TimeBasis.STREAM, 2 * DAY_MS)
    cutoff = Cutoff(TimeBasis.STREAM, STREAM_TIME_MS - 2 * DAY_MS)
    removed = sum(
        expire_range(session, shape, r, cutoff, options, before_delete=update_first_picks).expired
        for r in token_splits(4)
    )
    assert removed == 300 and 100 < len(raced) < 200
    left = contents(session, spec)
    assert left == {k.decode(): 1000 for k in raced}


def test_expiry_job_with_a_concurrent_writer_loses_no_update(session, keyspace, store_name, tmp_path):
    spec = seeded_store(session, keyspace, store_name, StoreType.GLOBAL_KV, old=3000, new=0, undated=0)
    table = table_for(spec)
    acknowledged: dict[str, int] = {}
    stop = threading.Event()

    def writer() -> None:
        rng = random.Random(7)
        value = 10_000
        while not stop.is_set():
            keys = rng.sample(range(3000), 20)
            value += 1
            batch = [Entry(f"old{k}".encode(), encode_long(value), 2, STREAM_TIME_MS) for k in keys]
            table.write_entries(session, batch, 20, now_micros())
            acknowledged.update({f"old{k}": value for k in keys})
            time.sleep(0.01)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        argv = ["--keyspace", keyspace, "--report-dir", str(tmp_path), "--store", spec.name, "--retention", "2d"]
        assert load_job("expire_state").main(argv) == 0
    finally:
        stop.set()
        thread.join(timeout=30)
    left = contents(session, spec)
    assert len(acknowledged) > 50, "the writer barely ran during the expiry"
    assert left == acknowledged  # every updated entry stayed with its last value; the rest expired
    removed = json.loads((tmp_path / "expire_state.json").read_text())["stores"][0]["removed"]
    assert 3000 - len(acknowledged) <= removed <= 3000


def test_processing_time_expiry_dry_run_and_table_ttl(session, keyspace, store_name, tmp_path):
    three_days_ago_us = (int(time.time() * 1000) - 3 * DAY_MS) * 1000
    spec = seeded_store(session, keyspace, store_name, StoreType.PARTITIONED_KV, new=0, write_ts=three_days_ago_us)
    table_for(spec).write_entries(
        session, [Entry(f"fresh{i}".encode(), encode_long(1), 2, None) for i in range(50)], 16, now_micros()
    )
    argv = ["--keyspace", keyspace, "--store", spec.name, "--retention", "1d", "--basis", "processing"]
    assert load_job("expire_state").main([*argv, "--report-dir", str(tmp_path / "dry"), "--dry-run"]) == 0
    dry = json.loads((tmp_path / "dry" / "expire_state.json").read_text())["stores"][0]
    assert (dry["removed"], dry["scanned"] - dry["kept"], len(contents(session, spec))) == (0, 310, 360)
    assert history.expired_before(session, keyspace, spec.name) is None  # a dry run deletes nothing
    assert registry.progress(session, keyspace, spec.name).outside_writes is None  # nor announces any

    assert load_job("expire_state").main([*argv, "--report-dir", str(tmp_path), "--table-ttl", "30d"]) == 0
    result = json.loads((tmp_path / "expire_state.json").read_text())["stores"][0]
    assert (result["removed"], result["undated"]) == (310, 0)  # processing time dates every entry
    assert sorted(contents(session, spec)) == sorted(f"fresh{i}" for i in range(50))
    assert result["table_ttl_s"] == 30 * 86_400
    ttl = session.execute(
        "SELECT default_time_to_live FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, spec.table),
    ).one()[0]
    assert ttl == 30 * 86_400


def test_stream_basis_without_stream_time_is_a_clear_error(session, keyspace, store_name, tmp_path, capsys):
    spec = provision_store(session, StoreSpec(keyspace, store_name, StoreType.GLOBAL_KV, 1))
    argv = ["--keyspace", keyspace, "--store", spec.name, "--retention", "1d", "--report-dir", str(tmp_path)]
    assert load_job("expire_state").main(argv) == 2
    assert "no stream time yet" in capsys.readouterr().err


@pytest.fixture(autouse=True)
def _spark(spark):
    """Every test here runs Spark jobs in-process: share the session."""
    return spark


def test_window_stores_expire_by_dropping_whole_segments_past_their_retention(
    session, keyspace, store_name, tmp_path, capsys
):
    minute = 60_000
    windowing = WindowSpec(minute, retention_ms=10 * minute, segment_ms=2 * minute)
    windows = StoreBuilder(session, store_name).with_keyspace(keyspace).partitioned_window_store(windowing, 3)
    windows = windows.create()
    for key in ("heron", "mill", "reed"):
        for m in range(30):
            windows.put(key, m + 1, m * minute, stream_time_ms=None)
    kv = seeded_store(session, keyspace, f"{store_name}_kv", StoreType.PARTITIONED_KV)
    # The stream's time: 30 minutes. Windows starting at or before minute 20 are expired;
    # segments 0-9 (starts 0:00-19:59) hold nothing else, segment 10 still holds minute 21.
    registry.record_batch(
        session, windows.spec, BatchPosition(batch_id=0, write_ts=now_micros(), start=None, end=None), 30 * minute
    )

    def stored() -> dict:
        rows = windows.raw_windows(EVERYTHING, 0, 2**62, stream_time_ms=None)
        return {(r.key.decode(), r.start_ms // minute) for r in rows}

    argv = ["--keyspace", keyspace, "--store", store_name]
    # A key-value store without --retention is refused before any segment is dropped.
    assert load_job("expire_state").main([*argv, "--store", kv.name, "--report-dir", str(tmp_path)]) == 2
    assert "give --retention" in capsys.readouterr().err
    assert len(stored()) == 90

    assert load_job("expire_state").main([*argv, "--report-dir", str(tmp_path / "dry"), "--dry-run"]) == 0
    dry = json.loads((tmp_path / "dry" / "expire_state.json").read_text())["stores"][0]
    assert (dry["unit"], dry["scanned"], dry["removed"], dry["kept"]) == ("segments", 15, 0, 5)
    assert len(stored()) == 90

    # A --retention (as `make maintenance` always gives) is the key-value stores': a window
    # store keeps expiring by its own.
    assert load_job("expire_state").main([*argv, "--report-dir", str(tmp_path), "--retention", "30d"]) == 0
    result = json.loads((tmp_path / "expire_state.json").read_text())["stores"][0]
    assert (result["scanned"], result["removed"], result["kept"]) == (15, 10, 5)
    assert (result["retention_ms"], result["cutoff_ms"]) == (10 * minute, 20 * minute)
    assert stored() == {(key, m) for key in ("heron", "mill", "reed") for m in range(20, 30)}
    # Minute 20 is still stored (its segment lives on) but expired: reads never return it.
    assert [w.start_ms // minute for w in windows.fetch_all(0, 2**62) if w.key == "mill"] == list(range(21, 30))
    assert history.expired_before(session, keyspace, store_name) == 20 * minute
    assert "(segments)" in (tmp_path / "expire_state.md").read_text()


def test_dropped_segments_bytes_are_freed_on_disk(session, keyspace, store_name, tmp_path):
    # Dropping hides expired windows at once; their bytes stay in the SSTables (TWCS never
    # compacts the deletes with them) until the job's garbagecollect rewrites those SSTables.
    minute = 60_000
    windowing = WindowSpec(minute, retention_ms=10 * minute, segment_ms=minute)
    windows = StoreBuilder(session, store_name).with_keyspace(keyspace).partitioned_window_store(windowing, 2)
    windows = windows.create()
    rows = [
        WindowedEntry(f"key-{k:05d}".encode(), m * minute, encode_long(k), 0, m * minute)
        for m in range(12)
        for k in range(1500)
    ]
    windows.table.write(session, rows, 32, None)
    nodetool = Nodetool.locate(cfg.resolve(NodetoolConfig))
    nodetool.flush(keyspace, windows.spec.table)

    def live_bytes() -> int:
        return int(float(nodetool.tablestats(keyspace, windows.spec.table)["space_used_live"] or 0))

    before = live_bytes()
    registry.record_batch(
        session, windows.spec, BatchPosition(batch_id=0, write_ts=now_micros(), start=None, end=None), 12 * minute
    )
    doomed = windowing.expired_segments(list(range(12)), 12 * minute)
    # Windows starting at or before minute 2 (12 - 10) are expired; segment 2 could still hold
    # later ones (2:00-2:59), so it stays.
    assert doomed == [0, 1]
    argv = ["--keyspace", keyspace, "--store", store_name, "--report-dir", str(tmp_path)]
    assert load_job("expire_state").main(argv) == 0
    result = json.loads((tmp_path / "expire_state.json").read_text())["stores"][0]
    assert result["removed"] == len(doomed)
    assert result["reclaim"].startswith(f"ran `nodetool garbagecollect {keyspace} {windows.spec.table}`")
    assert live_bytes() < before * 10.5 / 12  # two of twelve minutes' rows are gone from disk

    assert load_job("expire_state").main([*argv, "--nodetool", "off"]) == 0  # nothing more expired: no command
    assert json.loads((tmp_path / "expire_state.json").read_text())["stores"][0]["reclaim"] is None
