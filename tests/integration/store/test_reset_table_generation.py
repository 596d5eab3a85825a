"""A reset of a global, window or session store under a batch in flight: those tables have
partitions a reset cannot list (a key, a time segment), so their late entries cannot be shadowed
as a partitioned key-value store's are. The reset moves the store to a new table generation and
drops the old table: the paused writer's late entries then fail on a table that no longer
exists, and the store's table holds none of them, whatever the type."""

from __future__ import annotations

from dataclasses import replace

import pytest
from cassandra import InvalidRequest

from statestore.cli.main import main as cli
from statestore.core.codecs import encode_long, encode_text
from statestore.core.errors import StoreFencedError, WriterMayBeLiveError
from statestore.core.model import StoreSpec, StoreType
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.store.builder import StoreBuilder
from statestore.store.provision import provision_store
from tests.integration.conftest import dump

PARTITIONS = 3
ZOMBIE_TS = 5_000
# The columns of one row of each table: a writer's INSERT, as its batch sends it.
_ROW = {
    StoreType.GLOBAL_KV: ("key, value, batch_id", ()),
    StoreType.GLOBAL_VERSIONED: ("key, valid_to, valid_from, value, batch_id", (2**62, 0)),
    StoreType.PARTITIONED_WINDOW: ("partition, segment, key, window_start, value, batch_id", (0, 0, 0)),
    StoreType.PARTITIONED_SESSION: (
        "partition, segment, key, session_end, session_start, value, batch_id",
        (0, 0, 0, 0),
    ),
}


def _spec(keyspace: str, name: str, store_type: StoreType) -> StoreSpec:
    windowing = WindowSpec(60_000) if store_type.windowed else SessionSpec(60_000) if store_type.sessioned else None
    return StoreSpec(keyspace, name, store_type, PARTITIONS if store_type.partitioned else 1, windowing=windowing)


def _zombie_write(session, spec: StoreSpec, word: str) -> None:
    """One entry of batch 0, written to the table the writer opened, at its batch's timestamp."""
    columns, lead = _ROW[spec.store_type]
    if spec.store_type in (StoreType.GLOBAL_KV, StoreType.GLOBAL_VERSIONED):
        values = (encode_text(word), *lead)
    else:  # (partition, segment) first, then the key and its time columns
        values = (*lead[:2], encode_text(word), *lead[2:])
    marks = ", ".join(["%s"] * (len(values) + 2))
    session.execute(
        f"INSERT INTO {spec.keyspace}.{spec.table} ({columns}) VALUES ({marks}) USING TIMESTAMP {ZOMBIE_TS}",
        (*values, encode_long(1), 0),
    )


def _rows(session, spec: StoreSpec) -> int:
    return session.execute(f"SELECT COUNT(*) FROM {spec.keyspace}.{spec.table}").one()[0]


@pytest.mark.parametrize(
    "store_type",
    [StoreType.GLOBAL_KV, StoreType.GLOBAL_VERSIONED, StoreType.PARTITIONED_WINDOW, StoreType.PARTITIONED_SESSION],
)
def test_a_reset_under_a_batch_in_flight_leaves_none_of_the_paused_writers_entries(
    session, keyspace, store_name, store_type
):
    zombie = provision_store(session, _spec(keyspace, store_name, store_type))
    old = registry.take_epoch(session, zombie)
    batch0 = BatchPosition(
        batch_id=0, write_ts=ZOMBIE_TS, start=None, end=KafkaOffsets.parse('{"t":{"0":5}}'), query_id="q1"
    )
    registry.begin_batch(session, zombie, batch0, old)
    _zombie_write(session, zombie, "early")

    admin.truncate_store(session, keyspace, store_name, verb="resetting")
    moved = registry.lookup(session, keyspace, store_name)
    assert moved.table == f"{zombie.table}_r1" and moved.layout[:2] == zombie.layout[:2]
    after = registry.progress(session, keyspace, store_name)
    assert after.epoch > old and not after.has_batches and after.last_ts == ZOMBIE_TS
    assert _rows(session, moved) == 0

    # The writer wakes up: the rest of its batch goes to a table that is gone, its record is refused.
    with pytest.raises(InvalidRequest, match=r"(?i)table"):
        _zombie_write(session, zombie, "late")
    with pytest.raises(StoreFencedError, match="recording batch 0"):
        registry.record_batch(session, zombie, batch0, None, old)
    assert _rows(session, moved) == 0

    # A new writer opening the store by name (default table) gets the new table, and resets again move on.
    reopened = provision_store(session, _spec(keyspace, store_name, store_type))
    assert reopened.table == moved.table
    if store_type is StoreType.GLOBAL_KV:  # and so does the library's builder
        store = StoreBuilder(session, store_name).with_keyspace(keyspace).global_key_value_store().create()
        store.put("new", 3)
        assert dump(session, keyspace, store_name) == {"new": 3} and store.get("new") == 3
        store.delete("new")
    new = registry.take_epoch(session, reopened)
    registry.begin_batch(session, reopened, batch0, new)
    # A taken name (a re-layout's kept table, an interrupted reset's) is skipped, never adopted.
    session.execute(f"CREATE TABLE {keyspace}.{zombie.table}_r2 (k int PRIMARY KEY)")
    admin.truncate_store(session, keyspace, store_name, verb="resetting")
    assert registry.lookup(session, keyspace, store_name).table == f"{zombie.table}_r3"


def test_writer_stopped_truncates_in_place_and_a_reset_with_no_batch_in_flight_keeps_the_table(
    capsys, session, keyspace, store_name
):
    spec = provision_store(session, _spec(keyspace, store_name, StoreType.GLOBAL_KV))
    old = registry.take_epoch(session, spec)
    batch0 = BatchPosition(
        batch_id=0, write_ts=ZOMBIE_TS, start=None, end=KafkaOffsets.parse('{"t":{"0":5}}'), query_id="q1"
    )
    registry.begin_batch(session, spec, batch0, old)
    _zombie_write(session, spec, "early")
    reset = ["reset", store_name, "--yes", "--keyspace", keyspace]
    assert cli([*reset, "--writer-stopped"]) == 0  # the operator vouches the writer is gone: same table
    assert registry.lookup(session, keyspace, store_name).table == spec.table
    assert not registry.progress(session, keyspace, store_name).has_batches and _rows(session, spec) == 0

    new = registry.take_epoch(session, spec)
    registry.begin_batch(session, spec, batch0, new)
    registry.record_batch(session, spec, batch0, None, new)
    _zombie_write(session, spec, "kept")
    assert dump(session, keyspace, store_name) == {"kept": 1}
    assert cli(reset) == 0  # nothing in flight: a paused writer has nothing left to send
    assert registry.lookup(session, keyspace, store_name).table == spec.table
    assert dump(session, keyspace, store_name) == {}
    assert "its table is now" not in capsys.readouterr().out

    registry.begin_batch(session, spec, batch0, registry.take_epoch(session, spec))
    assert cli(reset) == 0  # in flight: moved, and the CLI says where
    assert f"its table is now {keyspace}.{spec.table}_r1 ({spec.table} was dropped" in capsys.readouterr().out


def test_a_lost_table_whose_next_generation_name_does_not_fit_is_refused_naming_the_loss(session, keyspace, store_name):
    """A store whose table is gone starts over in a new generation of it; when no next name fits
    in Cassandra's 48 characters the reset is refused, and says the table is gone (it said "its
    batch None was begun", the refusal of a batch in flight)."""
    long_name = f"t{'x' * 44}_r9"  # 48 characters: the next generation, _r10, does not fit
    spec = provision_store(session, replace(_spec(keyspace, store_name, StoreType.GLOBAL_KV), table_name=long_name))
    epoch = registry.take_epoch(session, spec)
    batch0 = BatchPosition(
        batch_id=0, write_ts=ZOMBIE_TS, start=None, end=KafkaOffsets.parse('{"t":{"0":5}}'), query_id="q1"
    )
    registry.begin_batch(session, spec, batch0, epoch)
    registry.record_batch(session, spec, batch0, None, epoch)
    session.execute(f"DROP TABLE {keyspace}.{long_name}")
    with pytest.raises(WriterMayBeLiveError, match=rf"its table {long_name} is gone, .*Nothing was deleted") as refused:
        admin.truncate_store(session, keyspace, store_name, verb="resetting")
    assert "None" not in str(refused.value)
    assert registry.progress(session, keyspace, store_name).last_batch_id == 0
