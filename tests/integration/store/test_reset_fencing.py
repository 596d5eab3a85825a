"""A reset on the real Cassandra fences every earlier writer: it takes the store's lease and a
newer epoch before it truncates, so a writer paused mid-batch records nothing afterwards, and the
entries and dead letters such a writer still sends after the truncate (with its batch's write
timestamp) are shadowed, while a new stream's writes (timestamps above the reset's floor) count."""

from __future__ import annotations

import pytest

from statestore.core.codecs import encode_long, encode_text
from statestore.core.errors import StoreFencedError
from statestore.core.model import StoreSpec, StoreType
from statestore.core.partitioner import partition_for
from statestore.store import admin
from statestore.store.book import deadletters, registry
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.store.provision import provision_store
from statestore.stream.position import write_ts_for
from tests.integration.conftest import dump

PARTITIONS = 3


def _write(session, spec: StoreSpec, word: str, count: int, batch_id: int, ts: int) -> None:
    key = encode_text(word)
    session.execute(
        f"INSERT INTO {spec.keyspace}.{spec.table} (partition, key, value, batch_id) VALUES (%s, %s, %s, %s)"
        " USING TIMESTAMP %s",
        (partition_for(key, spec.partitions), key, encode_long(count), batch_id, ts),
    )


def _letter(offset: int, batch_id: int) -> deadletters.DeadLetter:
    """A dead letter of topic t, partition 0 (a message without a value)."""
    return deadletters.DeadLetter("t", 0, offset, 0, deadletters.NULL_VALUE, "no value", None, batch_id, None)


def test_a_reset_fences_the_writer_it_interrupts(session, keyspace, store_name):
    spec = provision_store(session, StoreSpec(keyspace, store_name, StoreType.PARTITIONED_KV, PARTITIONS))
    old = registry.take_epoch(session, spec)
    batch0 = BatchPosition(
        batch_id=0,
        write_ts=1_000,
        start=KafkaOffsets.parse('{"t":{"0":0}}'),
        end=KafkaOffsets.parse('{"t":{"0":5}}'),
        query_id="q1",
    )
    registry.begin_batch(session, spec, batch0, old)
    registry.record_batch(session, spec, batch0, None, old)
    # Batch 1 begins with a timestamp from the writer's clock (a minute ahead of ours), writes
    # half of its entries, and pauses.
    ts = write_ts_for(registry.progress(session, keyspace, store_name), 1) + 60_000_000
    batch1 = BatchPosition(
        batch_id=1,
        write_ts=ts,
        start=KafkaOffsets.parse('{"t":{"0":5}}'),
        end=KafkaOffsets.parse('{"t":{"0":9}}'),
        query_id="q1",
    )
    registry.begin_batch(session, spec, batch1, old)
    _write(session, spec, "early", 1, 1, ts)

    admin.truncate_store(session, keyspace, store_name, verb="resetting")
    after = registry.progress(session, keyspace, store_name)
    assert after.epoch > old and not after.has_batches and after.offsets is None
    assert dump(session, keyspace, store_name) == {}

    # The paused writer wakes up: the rest of its batch lands after the truncate (its entries
    # and its dead letters, found by the simulator: they landed), its record (and any later
    # batch) is refused.
    for word in ("late", "words", "of", "the", "zombie"):
        _write(session, spec, word, 1, 1, ts)
    deadletters.write(session, keyspace, store_name, [_letter(7, 1)], write_ts=ts)
    assert list(deadletters.read_all(session, keyspace, store_name)) == []
    with pytest.raises(StoreFencedError, match="recording batch 1"):
        registry.record_batch(session, spec, batch1, None, old)
    batch2 = BatchPosition(
        batch_id=2,
        write_ts=ts + 1,
        start=KafkaOffsets.parse('{"t":{"0":9}}'),
        end=KafkaOffsets.parse('{"t":{"0":12}}'),
        query_id="q1",
    )
    with pytest.raises(StoreFencedError, match="beginning batch 2"):
        registry.begin_batch(session, spec, batch2, old)
    assert dump(session, keyspace, store_name) == {}
    assert not registry.progress(session, keyspace, store_name).has_batches

    # A new stream's first batch gets a timestamp above the reset's floor: its writes count.
    new = registry.take_epoch(session, spec)
    fresh_ts = write_ts_for(registry.progress(session, keyspace, store_name), 0)
    assert fresh_ts > ts
    fresh = BatchPosition(
        batch_id=0, write_ts=fresh_ts, start=None, end=KafkaOffsets.parse('{"t":{"0":3}}'), query_id="q2"
    )
    registry.begin_batch(session, spec, fresh, new)
    _write(session, spec, "late", 7, 0, fresh_ts)
    deadletters.write(session, keyspace, store_name, [_letter(2, 0)], write_ts=fresh_ts)
    registry.record_batch(session, spec, fresh, None, new)
    assert dump(session, keyspace, store_name) == {"late": 7}
    assert [(d.kafka_offset, d.batch_id) for d in deadletters.read_all(session, keyspace, store_name)] == [(2, 0)]


# Global, window and session stores under a batch in flight move to a new table generation
# instead: tests/integration/store/test_reset_table_generation.py.
