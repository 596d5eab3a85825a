"""Compaction on the real stack: versioned history older than the retention goes (the latest
version stays), keys deleted before it go entirely, and tombstones past the threshold make
the job ask Cassandra to compact, with Cassandra's figures before and after."""

from __future__ import annotations

import json

from statestore.core import config as cfg
from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import Entry, StoreSpec, StoreType
from statestore.maintenance.shared.nodetool import Nodetool, NodetoolConfig
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.store.provision import provision_store
from statestore.store.tables import table_for
from statestore.stream.position import now_micros
from tests.integration.conftest import wait_for
from tests.integration.maintenance.test_maintenance_audit import load_job

T = 1_750_000_000_000  # the stream's latest event time
DAY = 86_400_000
STEPS = (T - 5 * DAY, T - 4 * DAY, T - 3 * DAY, T - 2 * DAY, T - 3_600_000)


def seed_versions(session, keyspace, name, store_type, keys=60):
    """Keys with versions starting at each of STEPS; k0-k9 deleted at T-3d, k10-k14 at T-1h."""
    spec = provision_store(session, StoreSpec(keyspace, name, store_type, 2))
    table = table_for(spec)
    for i in range(keys):
        for n, start in enumerate(STEPS):
            deleted = (i < 10 and n == 2) or (10 <= i < 15 and n == 4)
            table.put_version(
                session, f"k{i}".encode(), None if deleted else encode_long(n), start, 1, start, now_micros()
            )
            if deleted:
                break
    registry.record_batch(
        session,
        spec,
        BatchPosition(batch_id=1, write_ts=now_micros(), start=None, end=KafkaOffsets.parse('{"t":{"0":1}}')),
        T,
    )
    # Tombstones purgeable at once, and no automatic compaction: left alone, Cassandra may compact
    # the pruned versions' tombstones away (gc_grace 0) before the job's second run looks at them.
    admin.alter_store(session, keyspace, name, {"gc_grace_seconds": 0})
    Nodetool.locate(cfg.resolve(NodetoolConfig)).run("disableautocompaction", keyspace, spec.table)
    return spec


def history(session, spec, key: str) -> list[tuple[int, int | None]]:
    versions = table_for(spec).history(session, key.encode())
    return [(v.valid_from, None if v.value is None else decode_long(v.value)) for v in versions]


def droppable_ratio(spec) -> float:
    return float(
        Nodetool.locate(cfg.resolve(NodetoolConfig)).tablestats(spec.keyspace, spec.table)["droppable_tombstone_ratio"]
    )


def test_history_is_pruned_and_tombstones_are_compacted(spark, session, keyspace, store_name, tmp_path):
    stores = [
        seed_versions(session, keyspace, f"{store_name}_p", StoreType.PARTITIONED_VERSIONED),
        seed_versions(session, keyspace, f"{store_name}_g", StoreType.GLOBAL_VERSIONED),
    ]
    kv = provision_store(session, StoreSpec(keyspace, f"{store_name}_kv", StoreType.GLOBAL_KV, 1))
    table_for(kv).write_entries(session, [Entry(b"a", encode_long(1), 1, T)], 1, None)
    argv = ["--keyspace", keyspace, *(a for s in [*stores, kv] for a in ("--store", s.name))]
    argv += ["--history-retention", "2d", "--tombstone-threshold", "0.05"]
    # The first run only prunes: the seeded deletions' tombstones may already count as droppable
    # when a slow run crosses a minute boundary, and compacting them now would leave the second
    # run nothing to compact.
    first_argv = [*argv, "--cassandra-compaction", "off", "--report-dir", str(tmp_path / "first")]
    assert load_job("compact_state").main(first_argv) == 0

    for spec in stores:
        # Every version that ended by the cutoff (T-2d) is gone; the one valid at it stays.
        assert history(session, spec, "k20") == [(STEPS[3], 3), (STEPS[4], 4)]
        assert history(session, spec, "k3") == []  # deleted at T-3d: logically gone, now entirely
        assert history(session, spec, "k12") == [(STEPS[3], 3), (STEPS[4], None)]  # deleted at T-1h: kept
        assert table_for(spec).get(session, b"k20").value == encode_long(4)
    first = json.loads((tmp_path / "first" / "compact_state.json").read_text())
    for result in first["stores"][:2]:
        pruned = result["pruned"]
        # 45 live keys x 3 old versions + 10 early deletions x 3 versions + 5 late ones x 3 old versions.
        assert (pruned["keys"], pruned["versions"], pruned["dropped_versions"], pruned["dropped_keys"]) == (
            60,
            280,
            180,
            10,
        )
        assert sorted(pruned["dropped_key_sample"]) == sorted(f"k{i}" for i in range(10))
        assert result["cutoff_ms"] == T - 2 * DAY
        assert result["after_pruning"]["sstable_count"] == 2  # the deletions, flushed as tombstones
        assert result["after_compaction"] is None and not result["action"].startswith("ran")
    kv_result = first["stores"][2]
    assert kv_result["pruned"] is None and kv_result["action"].startswith("none")  # measured, not pruned
    assert "180 of 280 versions" in (tmp_path / "first" / "compact_state.md").read_text()

    # Cassandra counts a tombstone as droppable from the minute after it was written (its
    # histogram rounds deletion times up to the minute): wait for that, then run again.
    wait_for(lambda: all(droppable_ratio(s) > 0.05 for s in stores), 180, "tombstones droppable")
    assert load_job("compact_state").main([*argv, "--report-dir", str(tmp_path)]) == 0
    for result in json.loads((tmp_path / "compact_state.json").read_text())["stores"][:2]:
        assert result["pruned"]["dropped_versions"] == 0  # nothing left to prune
        pressure = result["after_pruning"]
        assert pressure["droppable_tombstone_ratio"] > 0.05
        assert result["action"].startswith("ran `nodetool compact")
        final = result["after_compaction"]
        assert final["droppable_tombstone_ratio"] == 0
        assert final["sstable_count"] == 1 and final["space_used_live_bytes"] < pressure["space_used_live_bytes"]
