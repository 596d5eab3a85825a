"""Sub-partitioned partitioned-kv stores on the real Cassandra: bounded partitions at 1M keys
(nodetool's figures), the seed's reads of an N = 1 table (and the CQL error an N > 1 table gives
them), and the re-layout: every entry kept, the old table kept until dropped, refused while a
writer holds the lease or for other store types."""

from __future__ import annotations

import json

import pytest
from cassandra import InvalidRequest

from statestore.cli.main import main as cli
from statestore.core import config as cfg
from statestore.core.codecs import encode_long
from statestore.core.errors import ConfirmationRequiredError, OptionError, UnsupportedOperationError
from statestore.core.model import Entry, StoreSpec, StoreType
from statestore.core.partitioner import partition_for
from statestore.maintenance.shared.nodetool import Nodetool, NodetoolConfig
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.book.lease import LeaseHeldError, StoreLease
from statestore.store.builder import StoreBuilder, open_store
from statestore.store.provision import provision_store, table_exists
from statestore.store.relayout import drop_old_table, relayout_store
from statestore.store.tables import table_for

MILLION = 1_000_000
_LATE_TS = 1_700_000_000_000_000  # a paused writer's batch timestamp (microseconds), before the reset's floor


def _position():
    """A batch recorded at a write timestamp above _LATE_TS: the reset's floor."""
    return registry.BatchPosition(batch_id=1, write_ts=_LATE_TS + 1000, start=None, end=None)


def test_a_million_keys_in_16_subpartitions_keep_the_largest_partition_under_a_tenth(session, keyspace):
    specs = {n: StoreSpec(keyspace, f"million_x{n}", StoreType.PARTITIONED_KV, 4, subpartitions=n) for n in (1, 16)}
    tables = {n: table_for(spec) for n, spec in specs.items()}
    for spec in specs.values():
        provision_store(session, spec, dead_letters=False)
    for start in range(0, MILLION, 250_000):
        chunk = [Entry(f"key{i:07d}".encode(), encode_long(i), 1) for i in range(start, start + 250_000)]
        for table in tables.values():
            table.write_entries(session, chunk, concurrency=256, write_ts=None)
    # nodetool's largest partition after a flush and a major compaction (one SSTable, so the
    # per-SSTable maximum is a partition's whole size); one JVM per step for both tables.
    nodetool = Nodetool.locate(cfg.resolve(NodetoolConfig))
    names = [spec.table for spec in specs.values()]
    nodetool.flush(keyspace, *names)
    nodetool.run("compact", keyspace, *names)
    stats = nodetool.tablestats_of([(keyspace, name) for name in names])
    largest = {n: int(stats[(keyspace, spec.table)]["compacted_partition_maximum_bytes"]) for n, spec in specs.items()}
    assert largest[16] * 10 < largest[1], largest
    per_location = tables[16].count_per_location(session)
    assert sum(per_location.values()) == MILLION
    assert len(per_location) == 64 and min(per_location.values()) > 0.8 * MILLION / 64
    for i in (0, 123_456, MILLION - 1):
        assert tables[16].get(session, f"key{i:07d}".encode()).value == encode_long(i)
    print(f"largest partition at 1M keys: N=1 {largest[1]:,} B, N=16 {largest[16]:,} B")


def test_the_seeds_reads_work_on_n1_and_fail_loudly_on_n16(session, keyspace):
    """The seed library reads `WHERE partition = ? AND key = ?`: an N = 1 store is its table
    exactly; on an N > 1 table the same read is a CQL error, never a silently missing key."""
    one = StoreBuilder(session, "seed_n1").with_keyspace(keyspace).partitioned_key_value_store(4).create()
    many = StoreBuilder(session, "seed_n16").with_keyspace(keyspace).partitioned_key_value_store(4, 16).create()
    for store in (one, many):
        store.put_all([(f"w{i}", i) for i in range(100)])
    seed_read = f"SELECT value FROM {keyspace}.{{}} WHERE partition = %s AND key = %s"
    for i in range(100):
        key = f"w{i}".encode()
        row = session.execute(seed_read.format(one.spec.table), (partition_for(key, 4), key)).one()
        assert row.value == encode_long(i)
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        session.execute(seed_read.format(many.spec.table), (partition_for(b"w1", 4), b"w1"))
    assert list(many.all()) == list(one.all())


def test_relayout_keeps_every_entry_and_the_old_table_until_dropped(session, keyspace):
    store = StoreBuilder(session, "relay").with_keyspace(keyspace).partitioned_key_value_store(4).create()
    store.put_all([(f"w{i:05d}", i) for i in range(5000)])
    before = list(store.all())

    result = relayout_store(session, keyspace, "relay", 8)
    spec = registry.lookup(session, keyspace, "relay")
    assert (spec.subpartitions, spec.table, result.entries) == (8, "relay_store_r1", 5000)
    moved = open_store(session, keyspace, "relay")
    assert list(moved.all()) == before
    assert moved.get("w01234") == 1234 and list(moved.range("w00010", "w00012")) == before[10:13]
    assert table_exists(session, keyspace, "relay_store")  # the way back, untouched

    with pytest.raises(OptionError, match="already"):
        relayout_store(session, keyspace, "relay", 8)
    with pytest.raises(OptionError, match="uses now"):
        drop_old_table(session, keyspace, "relay", "relay_store_r1", "relay")
    with pytest.raises(OptionError, match="not one of"):
        drop_old_table(session, keyspace, "relay", "other_store", "relay")
    with pytest.raises(ConfirmationRequiredError):
        drop_old_table(session, keyspace, "relay", "relay_store", "yes")
    drop_old_table(session, keyspace, "relay", "relay_store", "relay")
    assert not table_exists(session, keyspace, "relay_store")

    # Back to the seed's layout, into the next new table.
    relayout_store(session, keyspace, "relay", 1)
    spec = registry.lookup(session, keyspace, "relay")
    assert (spec.subpartitions, spec.table) == (1, "relay_store_r2")
    assert list(open_store(session, keyspace, "relay").all()) == before
    assert "PRIMARY KEY (partition, key)" in admin.describe_store(session, keyspace, "relay").schema_cql


def test_relayout_is_refused_while_a_writer_holds_the_lease_and_for_other_types(
    session, keyspace, cassandra_config, capsys
):
    store = StoreBuilder(session, "held").with_keyspace(keyspace).partitioned_key_value_store(2).create()
    store.put("a", 1)
    lease = StoreLease(session, keyspace, "held", "checkpoint-of-a-stream", 30)
    lease.acquire()
    try:
        with pytest.raises(LeaseHeldError, match="being written"):
            relayout_store(session, keyspace, "held", 4)
        argv = ["--keyspace", keyspace, "relayout", "held", "--subpartitions", "4"]
        assert cli(argv) == 4  # refused
    finally:
        lease.release()
    assert registry.lookup(session, keyspace, "held").subpartitions == 1
    assert not table_exists(session, keyspace, "held_store_r1")  # nothing copied

    StoreBuilder(session, "flat").with_keyspace(keyspace).global_key_value_store().create()
    with pytest.raises(UnsupportedOperationError, match="only partitioned-kv and partitioned-versioned stores"):
        relayout_store(session, keyspace, "flat", 4)
    capsys.readouterr()
    assert cli(["--keyspace", keyspace, "relayout", "held", "--subpartitions", "4"]) == 0
    # It says what it did, in one sentence (the CLI's rule: no --format, so no JSON line).
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 1 and said[0].startswith("store held now reads held_store_r1 (4 sub-partition(s), 1 entries")
    assert open_store(session, keyspace, "held").get("a") == 1


def test_splits_of_a_subpartitioned_table_read_every_entry_once(session, keyspace):
    """The parallel readers' splits (statestore.store.tables.splits) name (partition,
    sub-partition) pairs: together they read the store exactly, by range and by keys too."""
    from statestore.core.model import KeyRange

    store = StoreBuilder(session, "split16").with_keyspace(keyspace).partitioned_key_value_store(4, 16).create()
    store.put_all([(f"w{i:04d}", i) for i in range(2000)])
    table = store.table
    everything = sorted(store.table.scan_unordered(session))
    splits = table.splits(5)
    assert len(splits) == 5 and sum(len(s.partitions) for s in splits) == 64
    assert sorted(e for s in splits for e in table.read_split(session, s)) == everything
    lower, upper = b"w0100", b"w0199"
    ranged = [e for s in table.splits(3, KeyRange(lower, upper)) for e in table.read_split(session, s)]
    assert sorted(ranged) == [e for e in everything if lower <= e.key <= upper]
    keys = [b"w0007", b"w1999", b"absent"]
    found = [e.key for s in table.splits(4, keys=keys) for e in table.read_split(session, s)]
    assert sorted(found) == [b"w0007", b"w1999"]


def test_cli_http_and_reset_read_and_empty_every_subpartition(session, keyspace, cassandra_config, capsys):
    from fastapi.testclient import TestClient

    from statestore.http.app import create_app

    assert cli(["--keyspace", keyspace, "create-store", "above", "--partitions", "3", "--subpartitions", "8"]) == 0
    store = open_store(session, keyspace, "above")
    words = {f"w{i:03d}": i for i in range(300)}
    store.put_all(list(words.items()))
    capsys.readouterr()
    assert cli(["--keyspace", keyspace, "dump", "above", "--format", "csv"]) == 0
    dumped = capsys.readouterr().out.splitlines()[1:]
    assert dumped == [f"{k},{v}" for k, v in sorted(words.items())]
    assert cli(["--keyspace", keyspace, "count", "above", "--exact", "--format", "value"]) == 0
    assert capsys.readouterr().out.strip() == "300"
    assert cli(["--keyspace", keyspace, "describe", "above", "--count-partitions", "--format", "json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["subpartitions"] == 8 and sum(described["entries_per_partition"]) == 300

    with TestClient(create_app(cassandra_config)) as client:
        assert client.get("/stores/above").json()["subpartitions"] == 8
        assert client.get("/stores/above/keys/w042").json()["value"] == 42
        keys, token = [], None
        while True:
            page = client.get("/stores/above/entries", params={"limit": 64, **({"page_token": token} if token else {})})
            body = page.json()
            keys += [entry["key"] for entry in body["entries"]]
            if not (token := body["next_page_token"]):
                break
        assert keys == sorted(words)

    # A reset deletes every Cassandra partition (each sub-partition), shadowing late writes too.
    registry.record_batch(session, store.spec, _position(), None)
    admin.truncate_store(session, keyspace, "above")
    assert list(open_store(session, keyspace, "above").all()) == []
    late = table_for(store.spec)
    late.write_entries(session, [Entry(b"w001", encode_long(1), 0)], 8, write_ts=_LATE_TS)
    assert late.get(session, b"w001") is None  # written below the reset's tombstones


def test_a_write_during_the_copy_fails_the_verification_and_changes_nothing(session, keyspace, monkeypatch):
    """A program holding no lease (the library) updates an entry already copied: the counts
    still agree, the checksums do not; the new table is dropped and the store left as it was."""
    import itertools

    from statestore.core.errors import StoreChangedError
    from statestore.store import relayout as module

    store = StoreBuilder(session, "racy").with_keyspace(keyspace).partitioned_key_value_store(2).create()
    store.put_all([(f"w{i:03d}", i) for i in range(500)])
    copied: list[bytes] = []

    def chunk_then_write(entries, size):
        chunk = list(itertools.islice(entries, size))
        if copied and chunk:  # the second chunk: a key of the first one changes behind the copy
            store.put(copied[0].decode(), -1)
        copied.extend(entry.key for entry in chunk)
        return iter(chunk)

    monkeypatch.setattr(module, "_CHUNK", 100)
    monkeypatch.setattr(module, "islice", chunk_then_write)
    with pytest.raises(StoreChangedError, match="not verified"):
        relayout_store(session, keyspace, "racy", 4)
    spec = registry.lookup(session, keyspace, "racy")
    assert (spec.table, spec.subpartitions) == ("racy_store", 1)
    assert not table_exists(session, keyspace, "racy_store_r1")
    assert open_store(session, keyspace, "racy").get(copied[0].decode()) == -1
