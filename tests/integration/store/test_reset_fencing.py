"""A reset on the real Cassandra fences every earlier writer: it takes the store's lease and a
newer epoch before it truncates, so a writer paused mid-batch records nothing afterwards, and the
entries such a writer still sends after the truncate (with its batch's write timestamp) are
shadowed, while a new stream's writes (timestamps above the reset's floor) count."""

from __future__ import annotations

import pytest

from statestore.core.codecs import encode_long, encode_text
from statestore.core.errors import StoreFencedError
from statestore.core.model import StoreSpec, StoreType
from statestore.core.partitioner import partition_for
from statestore.store import admin, registry
from statestore.store.provision import provision_store
from statestore.stream.batches import write_ts_for
from tests.integration.conftest import dump

PARTITIONS = 3


def _write(session, spec: StoreSpec, word: str, count: int, batch_id: int, ts: int) -> None:
    key = encode_text(word)
    session.execute(
        f"INSERT INTO {spec.keyspace}.{spec.table} (partition, key, value, batch_id) VALUES (%s, %s, %s, %s)"
        " USING TIMESTAMP %s",
        (partition_for(key, spec.partitions), key, encode_long(count), batch_id, ts),
    )


def test_a_reset_fences_the_writer_it_interrupts(session, keyspace, store_name):
    spec = provision_store(session, StoreSpec(keyspace, store_name, StoreType.PARTITIONED_KV, PARTITIONS))
    old = registry.take_epoch(session, spec)
    registry.begin_batch(session, spec, 0, 1_000, '{"t":{"0":0}}', '{"t":{"0":5}}', "q1", 0, old)
    registry.record_batch(session, spec, 0, 1_000, '{"t":{"0":5}}', None, old)
    # Batch 1 begins with a timestamp from the writer's clock (a minute ahead of ours), writes
    # half of its entries, and pauses.
    ts = write_ts_for(registry.progress(session, keyspace, store_name), 1) + 60_000_000
    registry.begin_batch(session, spec, 1, ts, '{"t":{"0":5}}', '{"t":{"0":9}}', "q1", 0, old)
    _write(session, spec, "early", 1, 1, ts)

    admin.truncate_store(session, keyspace, store_name, verb="resetting")
    after = registry.progress(session, keyspace, store_name)
    assert after.epoch > old and not after.has_batches and after.offsets is None
    assert dump(session, keyspace, store_name) == {}

    # The paused writer wakes up: the rest of its batch lands after the truncate, its record
    # (and any later batch) is refused.
    for word in ("late", "words", "of", "the", "zombie"):
        _write(session, spec, word, 1, 1, ts)
    with pytest.raises(StoreFencedError, match="recording batch 1"):
        registry.record_batch(session, spec, 1, ts, '{"t":{"0":9}}', None, old)
    with pytest.raises(StoreFencedError, match="beginning batch 2"):
        registry.begin_batch(session, spec, 2, ts + 1, '{"t":{"0":9}}', '{"t":{"0":12}}', "q1", 0, old)
    assert dump(session, keyspace, store_name) == {}
    assert not registry.progress(session, keyspace, store_name).has_batches

    # A new stream's first batch gets a timestamp above the reset's floor: its writes count.
    new = registry.take_epoch(session, spec)
    fresh_ts = write_ts_for(registry.progress(session, keyspace, store_name), 0)
    assert fresh_ts > ts
    registry.begin_batch(session, spec, 0, fresh_ts, None, '{"t":{"0":3}}', "q2", 0, new)
    _write(session, spec, "late", 7, 0, fresh_ts)
    registry.record_batch(session, spec, 0, fresh_ts, '{"t":{"0":3}}', None, new)
    assert dump(session, keyspace, store_name) == {"late": 7}
