"""`statestore migrate` turns a hopping window count store that keeps a row per window (made
before panes) into panes (statestore.store.migration): every reader returns exactly what it
returned before, at any stream time; a second migrate does nothing; it is refused while a stream
holds the store, and, before anything is written, for a store of aggregates; a store written
only by put() is left as it is; a conversion that failed before its switch leaves the store on
its old table and can simply be run again; and the word count's stream counts on exactly over
the copied rows."""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import replace

import pytest

from statestore.cli.main import main as cli
from statestore.conn.cassandra import DDL_PROFILE, create_keyspace
from statestore.core.codecs import LONG
from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import EVERYTHING, KeyRange, StoreSpec, StoreType, WindowedEntry
from statestore.core.windows import WindowSpec
from statestore.store import migration
from statestore.store.book import registry, schema
from statestore.store.book.lease import StoreLease
from statestore.store.builder import open_window_store
from statestore.store.provision import provision_store, table_exists
from tests.integration.stream.test_windowed_wordcount import (
    BASE_MS,
    Reference,
    _late_letters,
    _records,
    _run_batch,
    _stored,
)

# Hop 20 s and 25 s (panes of 20 s and 5 s), windows over ten one-minute segments.
WINDOWINGS = {
    "hop20": WindowSpec(60_000, 20_000, retention_ms=300_000, segment_ms=60_000),
    "hop25": WindowSpec(60_000, 25_000, grace_ms=5_000, retention_ms=300_000, segment_ms=60_000),
}
KEYS = ["a", "b", "\u00e9t\u00e9", "zz", "k1", "k10", "k2", "word"]
STREAM_TIMES = (None, 380_000, 560_000)  # none, some windows expired, most expired
UP_TO_DATE = f"schema {schema.SCHEMA_VERSION}, up to date"


@pytest.fixture(scope="module")
def own_keyspace(session):
    """A keyspace of this module's own: `migrate` without a store takes every store in it."""
    name = f"mp_{uuid.uuid4().hex[:10]}"
    create_keyspace(session, name)
    yield name
    session.execute(f"DROP KEYSPACE IF EXISTS {name}", execution_profile=DDL_PROFILE, timeout=60)


def _hopping_store(session, keyspace, windowing, *, topic="words", value_codec="long"):
    """A hopping window store registered with a row per window (as before panes), fed by
    `topic`'s stream (None: made for put() alone)."""
    spec = StoreSpec(
        keyspace, f"w{uuid.uuid4().hex[:10]}", StoreType.PARTITIONED_WINDOW, 3, value_codec=value_codec,
        windowing=replace(windowing, panes=False),
    )  # fmt: skip
    assert spec.windowing.panes is False
    return provision_store(session, spec, topic)


def _fill(session, keyspace, name, windowing, seed):
    """Random windows: most by put(), some written with a batch and an event time as the stream does."""
    rng = random.Random(seed)
    store = open_window_store(session, keyspace, name)
    starts = range(0, 600_000, windowing.hop_ms)
    for key in KEYS:
        for start in rng.sample(starts, rng.randint(1, len(starts) // 2)):
            value = rng.choice([0, 1, -1, 2**63 - 1, -(2**63), rng.randint(-1000, 10**6)])
            if rng.random() < 0.7:
                assert store.put(key, value, start, stream_time_ms=None)
            else:
                written = WindowedEntry(key.encode(), start, LONG.encode(value), rng.randint(0, 50), start + 999)
                store.table.write(session, [written], 1, None)


def _readings(session, keyspace, name, windowing) -> dict:
    """What every reader of the store returns, at each of STREAM_TIMES."""
    store = open_window_store(session, keyspace, name)
    seen = {"count": store.count_entries(), "rows": _rows(session, keyspace, name)}
    for now in STREAM_TIMES:
        at = {"stream_time_ms": now}
        seen[now] = {
            "get": {(k, s): store.fetch(k, s, **at) for k in KEYS for s in range(0, 620_000, windowing.hop_ms)},
            "fetch": {
                (k, low, high): (store.fetch(k, low, high, **at), store.backward_fetch(k, low, high, **at))
                for k in KEYS
                for low, high in ((0, 2**62), (50_000, 130_000), (119_999, 240_001), (300_000, 300_000))
            },
            "range": [
                list(store.fetch_range(lo, hi, 40_000, 500_000, reverse=reverse, **at))
                for lo, hi in (("b", "k2"), (None, "k1"), ("word", None))
                for reverse in (False, True)
            ],
            "fetch_all": [list(store.fetch_all(100_000, 400_000, reverse=r, **at)) for r in (False, True)],
            "all": [list(store.all(**at)), list(store.backward_all(**at))],
            "latest": store.latest(3, **at) if now is not None else store.latest(2),
            "raw": list(store.raw_windows(KeyRange(b"b", b"word"), 60_000, 360_000, **at)),
        }
    return seen


def _rows(session, keyspace, name) -> list[WindowedEntry]:
    """Every window of the store as stored: key, start, value, batch and time."""
    return list(open_window_store(session, keyspace, name).raw_windows(EVERYTHING, 0, 2**63 - 1))


def _cli_readings(keyspace, name, capsys) -> list[str]:
    """`statestore windows` and `get` of the store, as printed."""
    printed = []
    for argv in (["windows", name, "--format", "json"], ["get", name, "k1", "--format", "json"]):
        assert cli([*argv, "--keyspace", keyspace]) == 0
        printed.append(capsys.readouterr().out)
    return printed


@pytest.mark.parametrize("windowing", WINDOWINGS.values(), ids=WINDOWINGS.keys())
def test_a_hopping_store_becomes_panes_and_every_reader_returns_what_it_did(session, own_keyspace, windowing, capsys):
    spec = _hopping_store(session, own_keyspace, windowing)
    _fill(session, own_keyspace, spec.name, windowing, seed=windowing.hop_ms)
    before, printed_before = (
        _readings(session, own_keyspace, spec.name, windowing),
        _cli_readings(own_keyspace, spec.name, capsys),
    )
    assert before["count"] > 20 and before[380_000]["all"][0] != before[None]["all"][0]  # retention hides some

    assert cli(["migrate", spec.name, "--keyspace", own_keyspace]) == 0
    lines = capsys.readouterr().out.splitlines()
    migrated = registry.lookup(session, own_keyspace, spec.name)
    assert migrated.windowing.panes is True and migrated.windowing == windowing
    assert migrated.table == f"{spec.table}_r1"
    assert lines == [
        f"store {spec.name}: {UP_TO_DATE}",
        f"store {spec.name}: hopping windows now kept as panes in {migrated.table} ({before['count']} window(s) "
        f"copied and verified in {lines[1].split(' in ')[-1].split('s)')[0]}s); {spec.table} is kept as the way "
        f"back: drop it with `statestore relayout {spec.name} --drop-table {spec.table} --yes`",
    ]
    assert table_exists(session, own_keyspace, spec.table)  # the way back

    assert _readings(session, own_keyspace, spec.name, windowing) == before
    assert _cli_readings(own_keyspace, spec.name, capsys) == printed_before
    with pytest.raises(UnsupportedOperationError):
        open_window_store(session, own_keyspace, spec.name).put("a", 1, 0)

    assert cli(["migrate", spec.name, "--keyspace", own_keyspace]) == 0  # again: nothing to do
    assert capsys.readouterr().out.splitlines() == [f"store {spec.name}: {UP_TO_DATE}"]
    assert migration.to_panes(session, own_keyspace, spec.name) is None
    assert registry.lookup(session, own_keyspace, spec.name).table == migrated.table
    assert cli(["relayout", spec.name, "--drop-table", spec.table, "--yes", "--keyspace", own_keyspace]) == 0
    assert not table_exists(session, own_keyspace, spec.table)
    assert _readings(session, own_keyspace, spec.name, windowing) == before


def test_a_migration_is_refused_while_a_stream_holds_the_store(session, own_keyspace, capsys):
    spec = _hopping_store(session, own_keyspace, WINDOWINGS["hop20"])
    _fill(session, own_keyspace, spec.name, WINDOWINGS["hop20"], seed=1)
    writer = StoreLease(session, own_keyspace, spec.name, "/checkpoints/of/a/running/stream", 60)
    writer.acquire()
    try:
        assert cli(["migrate", spec.name, "--keyspace", own_keyspace]) == 4
        assert "being written by" in capsys.readouterr().err
        assert registry.lookup(session, own_keyspace, spec.name) == spec
        assert registry.lookup(session, own_keyspace, spec.name).windowing.panes is False
        assert not table_exists(session, own_keyspace, f"{spec.table}_r1")  # nothing created
    finally:
        writer.release()
    done = migration.migrate_store(session, own_keyspace, spec.name).as_dict()  # the DAG's result
    assert done["panes"]["new_table"] == registry.lookup(session, own_keyspace, spec.name).table == f"{spec.table}_r1"
    assert registry.lookup(session, own_keyspace, spec.name).windowing.panes is True


def test_aggregates_are_refused_before_any_write_and_put_stores_and_tumbling_ones_left_alone(session, own_keyspace):
    measures = "aggregate:n=count()"
    aggregates = _hopping_store(session, own_keyspace, WINDOWINGS["hop20"], value_codec=measures)
    puts_only = _hopping_store(session, own_keyspace, WINDOWINGS["hop25"], topic=None)
    tumbling = _hopping_store(session, own_keyspace, WindowSpec(60_000, retention_ms=300_000))
    _fill(session, own_keyspace, puts_only.name, WINDOWINGS["hop25"], seed=2)

    with pytest.raises(UnsupportedOperationError, match=r"holds aggregate:n=count\(\) values: only count stores"):
        migration.to_panes(session, own_keyspace, aggregates.name)
    for spec in (aggregates, puts_only, tumbling):
        done = migration.migrate_store(session, own_keyspace, spec.name)
        assert done.panes is None and done.describe() == f"store {spec.name}: {UP_TO_DATE}"
        assert done.as_dict() == done.bookkeeping.as_dict()  # the DAG's result, as before panes
        assert registry.lookup(session, own_keyspace, spec.name).layout == spec.layout
        assert not table_exists(session, own_keyspace, f"{spec.table}_r1")
    assert migration.to_panes(session, own_keyspace, tumbling.name) is None
    assert open_window_store(session, own_keyspace, puts_only.name).put("a", 1, 0, stream_time_ms=None)


def _lifetimes(session, keyspace, table, start_column) -> dict[tuple[bytes, int], int | None]:
    """Each row's seconds left to live (None: no TTL), by key and window (or pane) start."""
    rows = session.execute(f"SELECT key, {start_column} AS start, TTL(value) AS ttl FROM {keyspace}.{table}")
    return {(row.key, row.start): row.ttl for row in rows}


def test_each_copied_window_keeps_the_time_its_row_had_left_to_live(session, own_keyspace):
    """A store whose table got a default TTL partway (the expire job's --table-ttl): its older
    rows carry none, its newer ones what is left of theirs. The paned table is made with the old
    table's options, default TTL included, yet each copied row lives as long as it would have in
    the old table: no TTL stays none, and a TTL is not restarted by the copy."""
    windowing = WINDOWINGS["hop20"]
    spec = _hopping_store(session, own_keyspace, windowing)
    _fill(session, own_keyspace, spec.name, windowing, seed=5)
    session.execute(f"ALTER TABLE {spec.keyspace}.{spec.table} WITH default_time_to_live = 3600")
    store = open_window_store(session, own_keyspace, spec.name)
    for key in ("late1", "late2"):
        assert store.put(key, 7, 40_000, stream_time_ms=None)
    time.sleep(2.5)  # the TTLs run down: a copy that restarted them would show more
    before = _lifetimes(session, own_keyspace, spec.table, "window_start")
    assert {ttl is None for ttl in before.values()} == {True, False}
    assert all(ttl is None or ttl <= 3598 for ttl in before.values())

    migration.to_panes(session, own_keyspace, spec.name)
    migrated = registry.lookup(session, own_keyspace, spec.name)
    options = session.execute(
        "SELECT default_time_to_live FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (migrated.keyspace, migrated.table),
    ).one()
    assert options.default_time_to_live == 3600  # the old table's options
    after = _lifetimes(session, own_keyspace, migrated.table, "pane_start")
    assert after.keys() == before.keys()
    for window, ttl in before.items():
        if ttl is None:
            assert after[window] is None, window
        else:
            assert ttl - 60 <= after[window] <= ttl, window


def test_a_conversion_that_failed_before_its_switch_is_run_again(session, own_keyspace, monkeypatch):
    windowing = WINDOWINGS["hop20"]
    spec = _hopping_store(session, own_keyspace, windowing)
    _fill(session, own_keyspace, spec.name, windowing, seed=3)
    before = _rows(session, own_keyspace, spec.name)

    def lost(*args, **kwargs):
        raise ConnectionError("the switch never reached Cassandra")

    with monkeypatch.context() as patched:
        patched.setattr(registry, "swap_windowing", lost)
        with pytest.raises(ConnectionError):
            migration.to_panes(session, own_keyspace, spec.name)
    assert registry.lookup(session, own_keyspace, spec.name).layout == spec.layout
    assert not table_exists(session, own_keyspace, f"{spec.table}_r1")  # only this attempt's: dropped
    assert _rows(session, own_keyspace, spec.name) == before

    done = migration.to_panes(session, own_keyspace, spec.name)
    assert done.windows == len(before) and done.new_table == f"{spec.table}_r1"
    assert _rows(session, own_keyspace, spec.name) == before


def test_the_stream_counts_on_exactly_over_the_windows_migrate_copied(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    """A batch written a row per window, migrated, then batches of pane rows over the copied
    windows, stragglers among them (some of their windows closed): every window and late letter
    equals the brute force of every record."""
    size, hop, grace = 60_000, 20_000, 10_000
    windowing = WindowSpec(size, hop, grace)
    provision_store(
        session, StoreSpec(keyspace, store_name, StoreType.PARTITIONED_WINDOW, 4, windowing=windowing), topic
    )
    rng, reference = random.Random(48), Reference(size, hop, grace, 86_400_000)
    settings = {"window": size, "hop": hop, "grace": grace}
    batches = [
        _records(rng, 200, BASE_MS + size, BASE_MS + 5 * size, "a"),
        # Stream time about 4:59: stragglers from 3:00 on fall in closed windows and open ones.
        _records(rng, 100, BASE_MS + 5 * size, BASE_MS + 5 * size + 30_000, "b")
        + _records(rng, 100, BASE_MS + 3 * size, BASE_MS + 5 * size, "c"),
        _records(rng, 60, BASE_MS + 4 * size, BASE_MS + 6 * size, "d"),
    ]
    for number, records in enumerate(batches):
        rng.shuffle(records)
        _run_batch(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", records, **settings)
        reference.batch(records)
        if number == 0:
            assert not registry.lookup(session, keyspace, store_name).windowing.panes
            assert cli(["migrate", store_name, "--keyspace", keyspace]) == 0
            assert registry.lookup(session, keyspace, store_name).windowing.panes
        assert _stored(session, keyspace, store_name) == reference.counts

    assert reference.late
    assert _late_letters(session, keyspace, store_name) == reference.late
