"""The re-layout's pure parts: which rows each store type copies, the order-free checksum
that verifies them, and the Cassandra partitions a versioned table's copy reads."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from statestore.core.model import OPEN_END, Entry, StoreSpec, StoreType, Version
from statestore.store.relayout import _checksum, _entry_bytes, _rows_of, _version_bytes
from statestore.store.tables import table_for

VERSIONS = [
    Version(b"a", b"1", 0, 10, 1, 5),
    Version(b"a", None, 10, 20, 2, 12),  # a tombstone version
    Version(b"a", b"3", 20, OPEN_END, 3, 25),
    Version(b"b", b"", 7, OPEN_END),  # an empty value, no batch or time (the library)
]


def test_the_version_checksum_is_order_free():
    shuffled = random.Random(7).sample(VERSIONS, len(VERSIONS))
    assert _checksum(shuffled, _version_bytes) == _checksum(VERSIONS, _version_bytes)
    assert _checksum([], _version_bytes) == 0


@pytest.mark.parametrize(
    ("index", "changes"),
    [
        (0, {"key": b"a2"}),
        (0, {"value": b"2"}),
        (0, {"valid_from": 1}),
        (0, {"valid_to": 11}),
        (0, {"batch_id": None}),
        (0, {"time_ms": 6}),
        (1, {"value": b""}),  # a tombstone is not an empty value
        (3, {"value": None}),
    ],
)
def test_the_version_checksum_tells_every_column_apart(index, changes):
    changed = [replace(v, **changes) if i == index else v for i, v in enumerate(VERSIONS)]
    assert _checksum(changed, _version_bytes) != _checksum(VERSIONS, _version_bytes)


def test_the_entry_checksum_is_order_free_and_tells_values_apart():
    entries = [Entry(b"a", b"1", 1, 5), Entry(b"b", b"2", 2, None)]
    assert _checksum(entries[::-1], _entry_bytes) == _checksum(entries, _entry_bytes)
    assert _checksum([entries[0]._replace(value=b"9"), entries[1]], _entry_bytes) != _checksum(entries, _entry_bytes)


@pytest.mark.parametrize("subpartitions", [1, 8])
def test_a_versioned_store_copies_every_version_row_and_a_kv_store_its_entries(subpartitions):
    versioned = table_for(StoreSpec("ks", "pv", StoreType.PARTITIONED_VERSIONED, 4, subpartitions=subpartitions))
    rows = _rows_of(versioned)
    assert rows.unit == "versions" and rows.fingerprint is _version_bytes
    assert (rows.read, rows.write, rows.count) == (
        versioned.scan_versions,
        versioned.write_versions,
        versioned.count_versions,
    )
    kv = table_for(StoreSpec("ks", "pk", StoreType.PARTITIONED_KV, 4, subpartitions=subpartitions))
    rows = _rows_of(kv)
    assert rows.unit == "entries" and rows.fingerprint is _entry_bytes
    assert (rows.read, rows.write, rows.count) == (kv.scan_unordered, kv.write_entries, kv.count)


@pytest.mark.parametrize("subpartitions", [1, 8])
def test_a_versioned_copy_reads_each_cassandra_partition_once(subpartitions):
    table = table_for(StoreSpec("ks", "pv", StoreType.PARTITIONED_VERSIONED, 4, subpartitions=subpartitions))
    locations = table.partition_keys()
    assert len(locations) == len(set(locations)) == 4 * subpartitions
    assert all(len(location) == table.PARTITION_WHERE.count("?") for location in locations)
    homes = {table.partition_key_of(f"w{i}".encode()) for i in range(2000)}
    assert homes == set(locations)  # every key lives in one of them, and every one holds keys
