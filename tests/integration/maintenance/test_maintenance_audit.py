"""The partition audit on the real stack: an oversized partition is flagged, a normal one is
not, and the audit's sizes agree with Cassandra's own figures."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from statestore.core import config as cfg
from statestore.core.codecs import encode_long
from statestore.core.model import Entry, StoreSpec, StoreType
from statestore.maintenance.shared.nodetool import Nodetool, NodetoolConfig
from statestore.maintenance.shared.units import MIB
from statestore.store.book import history
from statestore.store.provision import provision_store
from statestore.store.tables import table_for

PROJECT = Path(__file__).resolve().parents[3]


def load_job(name: str):
    """jobs/<name>.py as a module (the jobs folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"job_{name}", PROJECT / "jobs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seed(session, keyspace, name, store_type, partitions, count, prefix="word", subpartitions=1):
    spec = provision_store(session, StoreSpec(keyspace, name, store_type, partitions, subpartitions=subpartitions))
    entries = [Entry(f"{prefix}{i:07d}".encode(), encode_long(i + 1), 7, 1_700_000_000_000 + i) for i in range(count)]
    table_for(spec).write_entries(session, entries, 64, 1_700_000_000_000_000)
    return spec


@pytest.fixture(scope="module")
def audited(spark, session, keyspace, tmp_path_factory):
    """One oversized partition (a 1-partition store, ~3 MiB) beside normal stores, audited with
    a 1 MiB warn and 2 MiB fail threshold."""
    stores = {
        "big": seed(session, keyspace, "audit_big", StoreType.PARTITIONED_KV, 1, 65_000),
        "normal": seed(session, keyspace, "audit_normal", StoreType.PARTITIONED_KV, 4, 2_000),
        "global": seed(session, keyspace, "audit_global", StoreType.GLOBAL_KV, 1, 500),
        # The big store's entries in 8 sub-partitions: each Cassandra partition ~0.4 MiB.
        "sub": seed(session, keyspace, "audit_sub", StoreType.PARTITIONED_KV, 1, 65_000, subpartitions=8),
    }
    # Cassandra may flush the big memtable midway through seeding under memory pressure, which
    # splits the partition across SSTables and halves nodetool's per-SSTable maximum: one SSTable.
    nodetool = Nodetool.locate(cfg.resolve(NodetoolConfig))
    nodetool.flush(keyspace, stores["big"].table)
    nodetool.compact(keyspace, stores["big"].table)
    report_dir = tmp_path_factory.mktemp("audit")
    argv = ["--keyspace", keyspace, "--report-dir", str(report_dir), "--warn-size", "1MiB", "--fail-size", "2MiB"]
    for spec in stores.values():
        argv += ["--store", spec.name]
    code = load_job("audit_partitions").main([*argv, "--flush"])
    report = json.loads((report_dir / "audit_partitions.json").read_text())
    yield code, report, report_dir, argv
    for spec in stores.values():
        session.execute(f"DROP TABLE IF EXISTS {keyspace}.{spec.table}")


def by_store(report) -> dict:
    return {s["store"]: s for s in report["stores"]}


def test_oversized_partition_fails_the_job_and_normal_ones_pass(audited):
    code, report, _, _ = audited
    assert code == 3
    assert report["status"] == "fail"
    stores = by_store(report)
    big = stores["audit_big"]
    assert (big["level"], big["partitions"], big["entries"]) == ("fail", 1, 65_000)
    assert [(b["partition"], b["level"]) for b in big["breaches"]] == [("partition 0", "fail")]
    assert 2 * MIB < big["largest"]["bytes"] < 4 * MIB
    assert any("global-kv" in advice for advice in big["recommendations"])
    # ~3 MiB in one partition, half the 1 MiB warn threshold as the target: 6-7 needed, 8 advised.
    assert any("statestore relayout STORE --subpartitions 8" in advice for advice in big["recommendations"])
    sub = stores["audit_sub"]
    assert (sub["level"], sub["partitions"], sub["entries"], sub["breaches"]) == ("ok", 8, 65_000, [])
    assert sub["largest"]["bytes"] < big["largest"]["bytes"] / 6 and sub["recommendations"] == []
    normal = stores["audit_normal"]
    assert (normal["level"], normal["partitions"], normal["entries"], normal["breaches"]) == ("ok", 4, 2_000, [])
    assert normal["recommendations"] == []
    glob = stores["audit_global"]
    assert (glob["level"], glob["partitions"], glob["entries"]) == ("ok", 500, 500)


def test_latest_audit_is_on_record(audited, session, keyspace):
    latest = history.runs(session, keyspace, "audit_big", history.AUDIT, limit=1)[0]
    assert latest.status == "fail"
    assert (latest.summary["entries"], latest.summary["largest_partition"]) == (65_000, "partition 0")


def test_largest_partition_agrees_with_cassandra_within_20_percent(audited):
    _, report, _, _ = audited
    big = by_store(report)["audit_big"]
    cassandra = big["cassandra"]
    assert cassandra["nodetool_error"] is None, cassandra["nodetool_error"]
    scanned = big["largest"]["bytes"]
    assert 0.8 <= scanned / cassandra["nodetool_max_partition_bytes"] <= 1.2
    assert big["agreement"] == pytest.approx(scanned / cassandra["nodetool_max_partition_bytes"], abs=0.001)
    # system_views.max_partition_size is the same bucket bound rounded up to whole MiB.
    assert (cassandra["max_partition_mib"] - 1) * MIB < scanned * 1.2
    # One node: its view is the whole table, and the report says so.
    assert (cassandra["nodes_answered"], cassandra["nodes_total"], cassandra["nodetool_nodes"]) == (1, 1, "1 of 1")
    assert scanned <= cassandra["max_partition_mib"] * MIB
    assert cassandra["sstable_count"] >= 1 and cassandra["nodetool_partitions"] == 1


def test_reports_are_written(audited):
    _, _, report_dir, _ = audited
    markdown = (report_dir / "audit_partitions.md").read_text()
    assert "audit_big" in markdown and "over the fail threshold" in markdown
    html = (report_dir / "audit_partitions.html").read_text()
    assert "<table>" in html and 'src="audit_partitions_audit_big.png"' in html
    for store in ("audit_big", "audit_normal", "audit_global"):
        assert (report_dir / f"audit_partitions_{store}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_warn_policy_reports_the_breach_without_failing(audited, tmp_path):
    _, _, _, argv = audited
    argv = [*argv[: argv.index("--report-dir")], "--report-dir", str(tmp_path), *argv[argv.index("--report-dir") + 2 :]]
    code = load_job("audit_partitions").main([*argv, "--policy", "warn", "--warn-entries", "1000"])
    report = json.loads((tmp_path / "audit_partitions.json").read_text())
    assert code == 0
    assert report["status"] == "warn"
    stores = by_store(report)
    assert stores["audit_big"]["level"] == "fail"
    # 2,000 entries over 4 partitions: about 500 each, under the 1,000-entry threshold.
    assert stores["audit_normal"]["level"] == "ok"
