"""Re-layout of a partitioned-versioned store on the real Cassandra: every version row of every
key is copied as it is (validity, tombstone versions, batch ids and times), so every `as_of`
read and every history is the same from N = 1 to N = 8 and back; refused while a writer holds
the lease or a batch is unfinished, and not verified when a version is added behind the copy."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from statestore.core.errors import StoreChangedError, WriterMayBeLiveError
from statestore.store import admin
from statestore.store import relayout as module
from statestore.store.book import registry
from statestore.store.book.lease import LeaseHeldError, StoreLease
from statestore.store.builder import StoreBuilder, open_store
from statestore.store.provision import table_exists
from statestore.store.relayout import relayout_store

KEYS = [f"k{i:02d}" for i in range(48)]
TIMES = (0, 2, 10, 33, 50, 89, 93, 96, 97, 1000)  # as_of probes, around the change points below
LAST_TS = 1_700_000_000_000_000  # the last batch's write timestamp (microseconds): the copies'
_BATCH = registry.BatchPosition(batch_id=1, write_ts=LAST_TS, start=None, end=None)


def _fill(store) -> None:
    """Several versions per key: puts in time order, a put before them (a version ending where
    the next begins), a delete (a tombstone version) and a batch's version after it (batch id
    and event time)."""
    rng = random.Random(11)
    for i, key in enumerate(KEYS):
        for t in sorted(rng.sample(range(5, 90), 4)):
            store.put(key, rng.randrange(-1000, 1000), t)
        if i % 5 == 0:
            store.put(key, i, 2)
        if i % 3 == 0:
            store.delete(key, 93)
        if i % 4 == 0:
            raw = store.key_codec.encode(key)
            value = store.value_codec.encode(10 * i)
            store.table.put_version(store.session, raw, value, 97, batch_id=100 + i, time_ms=1_700_000_000_000 + i)


def _reads(store) -> dict:
    """What readers see: every key's value as of each probe time, its history, the current values."""
    return {
        "as_of": {(key, t): store.get(key, as_of=t) for key in KEYS for t in TIMES},
        "history": {key: list(store.history(key)) for key in KEYS},
        "current": list(store.all()),
    }


def _rows(session, keyspace: str, table: str) -> Counter:
    """Every stored version row of `table`, read with plain CQL (not the library's scan)."""
    select = f"SELECT key, valid_from, valid_to, value, batch_id, time FROM {keyspace}.{table}"
    return Counter(tuple(row) for row in session.execute(select))


def test_relayout_copies_every_version_and_keeps_every_as_of_read_and_history(session, keyspace):
    store = StoreBuilder(session, "vrelay").with_keyspace(keyspace).partitioned_versioned_store(4).create()
    _fill(store)
    registry.record_batch(session, store.spec, _BATCH, None)
    before, rows = _reads(store), _rows(session, keyspace, "vrelay_store")
    assert sum(rows.values()) > 4 * len(KEYS) and any(row[3] is None for row in rows)  # histories, tombstones
    assert any(row[4] is not None for row in rows)

    result = relayout_store(session, keyspace, "vrelay", 8)
    spec = registry.lookup(session, keyspace, "vrelay")
    assert (spec.subpartitions, spec.table) == (8, "vrelay_store_r1")
    assert (result.unit, result.entries) == ("versions", sum(rows.values()))
    assert _rows(session, keyspace, "vrelay_store_r1") == rows
    assert _rows(session, keyspace, "vrelay_store") == rows  # the way back, untouched
    stamps = session.execute(f"SELECT WRITETIME(valid_from) FROM {keyspace}.vrelay_store_r1")
    assert {row[0] for row in stamps} == {LAST_TS}  # the stream's next batches win over the copies
    assert (
        "PRIMARY KEY ((partition, subpartition), key, valid_to)"
        in admin.describe_store(session, keyspace, "vrelay").schema_cql
    )
    moved = open_store(session, keyspace, "vrelay")
    assert _reads(moved) == before

    relayout_store(session, keyspace, "vrelay", 1)
    spec = registry.lookup(session, keyspace, "vrelay")
    assert (spec.subpartitions, spec.table) == (1, "vrelay_store_r2")
    assert _rows(session, keyspace, "vrelay_store_r2") == rows
    back = open_store(session, keyspace, "vrelay")
    assert _reads(back) == before
    assert "PRIMARY KEY (partition, key, valid_to)" in admin.describe_store(session, keyspace, "vrelay").schema_cql
    earlier = back.get(KEYS[1], as_of=49)
    back.put(KEYS[1], 7, 50)  # a later write splits a copied version (and wins over the copies)
    assert back.get(KEYS[1], as_of=50).value == 7 and back.get(KEYS[1], as_of=49) == earlier


def test_versioned_relayout_is_refused_while_held_or_unfinished_and_checks_the_copy(session, keyspace, monkeypatch):
    store = StoreBuilder(session, "vheld").with_keyspace(keyspace).partitioned_versioned_store(2).create()
    for t in range(0, 400, 10):
        store.put(f"w{t % 70:02d}", t, t)
    lease = StoreLease(session, keyspace, "vheld", "checkpoint-of-a-stream", 30)
    lease.acquire()
    try:
        with pytest.raises(LeaseHeldError, match="being written"):
            relayout_store(session, keyspace, "vheld", 4)
    finally:
        lease.release()
    registry.begin_batch(session, store.spec, _BATCH, None)
    with pytest.raises(WriterMayBeLiveError, match="never recorded"):
        relayout_store(session, keyspace, "vheld", 4)
    assert registry.lookup(session, keyspace, "vheld").table == "vheld_store"
    assert not table_exists(session, keyspace, "vheld_store_r1")  # nothing copied

    # A version added (by the library, holding no lease) to a key already copied: not verified.
    registry.record_batch(session, store.spec, _BATCH, None)
    copied: list[bytes] = []

    def chunk_then_write(rows, size):
        chunk = list(itertools.islice(rows, size))
        if copied and chunk:
            store.put(copied[0].decode(), -1, 5)
        copied.extend(version.key for version in chunk)
        return iter(chunk)

    monkeypatch.setattr(module, "_CHUNK", 10)
    monkeypatch.setattr(module, "islice", chunk_then_write)
    with pytest.raises(StoreChangedError, match="not verified: versions"):
        relayout_store(session, keyspace, "vheld", 4)
    assert registry.lookup(session, keyspace, "vheld").table == "vheld_store"
    assert not table_exists(session, keyspace, "vheld_store_r1")
