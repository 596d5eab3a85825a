"""The livestate data source against the real stack: for every store type a store is filled
through the library, read as a DataFrame and compared with what `statestore dump` prints for
it; pushed filters (key equality, IN, range, prefix, window and session times) give the rows of
the full read filtered here; a read runs in more than one input partition."""

from __future__ import annotations

import csv
import io
import uuid

import pytest
from pyspark.sql import functions as F

from statestore.cli.main import main
from statestore.core import codecs
from statestore.core.model import Entry
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.dataframe import register
from statestore.store.book import registry
from statestore.store.book.registry import BatchPosition
from statestore.store.builder import StoreBuilder
from statestore.store.retention import set_retention
from statestore.store.session import SessionKey

DAY_MS = 86_400_000
T0 = 1_760_000_000_000  # the window and session stores' times start here


@pytest.fixture(scope="module")
def livestate(spark):
    register(spark)
    return spark


@pytest.fixture(scope="module")
def stores(session, keyspace):
    """Makes stores; drops their tables and registry rows at the end (later tests list every
    store of the keyspace)."""
    made = []

    def make(build):
        name = f"df{uuid.uuid4().hex[:10]}"
        store = build(StoreBuilder(session, name).with_keyspace(keyspace)).create()
        made.append(store)
        return store

    yield make
    for store in made:
        session.execute(f"DROP TABLE IF EXISTS {keyspace}.{store.spec.table}")
        session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", (store.name,))


def _dump(capsys, keyspace: str, store: str) -> list[list[str]]:
    code = main(["dump", store, "--format", "csv", "--keyspace", keyspace])
    out, err = capsys.readouterr()
    assert code == 0, err
    return list(csv.reader(io.StringIO(out)))


def _frame(spark, keyspace: str, store: str, **options):
    reader = spark.read.format("livestate").option("store", store).option("keyspace", keyspace)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


KV_KEYS = [f"w{i:03d}" for i in range(300)] + ["é", "éa", "日本", "z", "Z", "a b", "a"]


def _fill_kv(store) -> dict[str, int]:
    truth = {key: (i * 7919) % 1000 - 500 for i, key in enumerate(KV_KEYS)}
    store.put_all(truth.items())
    return truth


KV_LAYOUTS = {
    "partitioned": lambda b: b.partitioned_key_value_store(4),
    "global": lambda b: b.global_key_value_store(),
    "subpartitioned": lambda b: b.partitioned_key_value_store(4, subpartitions=4),
}


@pytest.mark.parametrize("kind", sorted(KV_LAYOUTS))
def test_key_value_store_reads_as_dump_prints_it(capsys, livestate, keyspace, stores, kind):
    store = stores(KV_LAYOUTS[kind])
    truth = _fill_kv(store)
    dumped = _dump(capsys, keyspace, store.name)
    assert dumped[0] == ["key", "value"]

    df = _frame(livestate, keyspace, store.name)
    assert [f.name for f in df.schema.fields] == ["key", "value", "batch_id", "time"]
    assert df.schema["value"].dataType.typeName() == "long"  # the registry's long codec
    rows = df.collect()
    assert sorted((r.key, str(r.value)) for r in rows) == sorted(map(tuple, dumped[1:]))
    assert {r.key: r.value for r in rows} == truth
    assert all(r.time is not None for r in rows)  # put_all dates each entry


@pytest.mark.parametrize("kind", ["partitioned", "global"])
def test_versioned_store_reads_as_dump_prints_it_at_any_time(capsys, livestate, keyspace, stores, kind):
    store = stores(lambda b: b.partitioned_versioned_store(4) if kind == "partitioned" else b.global_versioned_store())
    keys = [f"v{i:02d}" for i in range(60)]
    for i, key in enumerate(keys):
        for t in (100, 200, 300):
            store.put(key, i * 1000 + t, t)
        if i % 5 == 0:
            store.delete(key, 250)  # deleted in between, back at 300
        if i % 7 == 0:
            store.delete(key, 350)  # deleted now: no current value
    dumped = _dump(capsys, keyspace, store.name)
    assert dumped[0] == ["key", "value"]

    df = _frame(livestate, keyspace, store.name)
    assert [f.name for f in df.schema.fields] == ["key", "valid_from", "valid_to", "value", "batch_id", "time"]
    current = df.select("key", "value", F.unix_millis("valid_from").alias("from_ms"), "valid_to").collect()
    assert sorted((r.key, str(r.value)) for r in current) == sorted(map(tuple, dumped[1:]))
    assert all(r.valid_to is None for r in current)
    assert {r.key: r.from_ms for r in current} == {k: store.get(k).valid_from for k in keys if store.get(k)}

    for as_of in (150, 250, 320):
        frame = _frame(livestate, keyspace, store.name, asOf=as_of)
        seen = {r.key: (r.value, r.from_ms, r.to_ms) for r in _validity(frame).collect()}
        records = {k: store.get(k, as_of=as_of) for k in keys}
        assert seen == {k: (r.value, r.valid_from, r.valid_to) for k, r in records.items() if r is not None}

    every = _validity(_frame(livestate, keyspace, store.name, versions="all")).collect()
    history = sorted(((k, r.value, r.valid_from, r.valid_to) for k in keys for r in store.history(k)), key=repr)
    assert sorted(((r.key, r.value, r.from_ms, r.to_ms) for r in every), key=repr) == history
    assert any(r.value is None for r in every)  # tombstones are versions too


def test_entries_past_a_stores_retention_are_absent_as_from_dump(capsys, livestate, session, keyspace, stores):
    store = stores(lambda b: b.partitioned_key_value_store(4))
    old = [Entry(f"old{i}".encode(), codecs.LONG.encode(i), 1, T0 - 2 * DAY_MS) for i in range(20)]
    new = [Entry(f"new{i}".encode(), codecs.LONG.encode(i), 1, T0 - 3_600_000) for i in range(20)]
    store.table.write_entries(session, old + new, 8, None)
    _set_stream_time(session, store.spec, T0)
    set_retention(session, keyspace, store.name, DAY_MS)
    dumped = _dump(capsys, keyspace, store.name)[1:]
    rows = _frame(livestate, keyspace, store.name).select("key", "value").collect()
    assert sorted((r.key, str(r.value)) for r in rows) == sorted(map(tuple, dumped))
    assert sorted(r.key for r in rows) == sorted(f"new{i}" for i in range(20))


def _validity(frame):
    return frame.select(
        "key", "value", F.unix_millis("valid_from").alias("from_ms"), F.unix_millis("valid_to").alias("to_ms")
    )


def _set_stream_time(session, spec, millis: int) -> None:
    position = BatchPosition(batch_id=1, write_ts=1, start=None, end=None)
    registry.record_batch(session, spec, position, millis)


def test_window_store_reads_as_dump_prints_it_retention_and_times_pushed(capsys, livestate, session, keyspace, stores):
    windowing = WindowSpec(60_000, retention_ms=DAY_MS)  # segments of half a day
    store = stores(lambda b: b.partitioned_window_store(windowing, 4))
    for i in range(40):
        for hour in range(0, 72, 6):  # three days of windows: several segments
            store.put(f"k{i:02d}", i * 100 + hour, T0 + hour * 3_600_000)
    _set_stream_time(session, store.spec, T0 + 72 * 3_600_000)  # the first two days are past retention
    dumped = _dump(capsys, keyspace, store.name)
    assert dumped[0] == ["key", "window_start", "window_end", "count"]
    assert 0 < len(dumped) - 1 < 40 * 12

    df = _frame(livestate, keyspace, store.name)
    assert [f.name for f in df.schema.fields] == ["key", "window_start", "window_end", "value", "batch_id", "time"]
    rows = [tuple(r) for r in _windows(df).collect()]
    assert sorted(map(tuple, rows)) == sorted((k, int(s), int(e), int(v)) for k, s, e, v in dumped[1:])

    def pushed(condition):
        return _windows(_frame(livestate, keyspace, store.name, pushdown="true").filter(condition)).collect()

    since, until = T0 + 60 * 3_600_000, T0 + 66 * 3_600_000
    assert sorted(map(tuple, pushed(F.col("window_start") >= _at(since)))) == sorted(r for r in rows if r[1] >= since)
    assert sorted(map(tuple, pushed(F.col("window_end") <= _at(until)))) == sorted(r for r in rows if r[2] <= until)
    one = pushed((F.col("key") == "k07") & (F.col("window_start") < _at(since)))
    assert sorted(map(tuple, one)) == sorted(r for r in rows if r[0] == "k07" and r[1] < since)
    assert pushed(F.col("window_start") < _at(T0)) == []  # before every window: no segment read


def _at(millis: int):
    """A Spark timestamp literal of epoch `millis`."""
    return F.timestamp_millis(F.lit(millis))


def _windows(frame):
    return frame.select(
        "key", F.unix_millis("window_start").alias("s"), F.unix_millis("window_end").alias("e"), "value"
    )


def test_session_store_reads_as_dump_prints_it_and_session_end_pushed(capsys, livestate, keyspace, stores):
    store = stores(lambda b: b.partitioned_session_store(SessionSpec(10_000), 4))
    for i in range(30):
        for n in range(6):
            start = T0 + n * 6 * 3_600_000 + i
            store.put(SessionKey(f"s{i:02d}", start, start + 5_000 + i), n + i)
    dumped = _dump(capsys, keyspace, store.name)
    assert dumped[0] == ["key", "session_start", "session_end", "count"]

    df = _frame(livestate, keyspace, store.name)
    assert [f.name for f in df.schema.fields] == ["key", "session_start", "session_end", "value", "batch_id", "time"]
    rows = _sessions(df).collect()
    assert sorted(map(tuple, rows)) == sorted((k, int(s), int(e), int(v)) for k, s, e, v in dumped[1:])
    assert len(rows) == 30 * 6

    since = T0 + 12 * 3_600_000
    frame = _frame(livestate, keyspace, store.name, pushdown="true").filter(F.col("session_end") > _at(since))
    assert sorted(map(tuple, _sessions(frame).collect())) == sorted(tuple(r) for r in rows if r[2] > since)


def _sessions(frame):
    return frame.select(
        "key", F.unix_millis("session_start").alias("s"), F.unix_millis("session_end").alias("e"), "value"
    )


@pytest.mark.parametrize("kind", sorted(KV_LAYOUTS))
def test_key_filters_pushed_give_the_full_reads_rows(livestate, keyspace, stores, kind):
    store = stores(KV_LAYOUTS[kind])
    _fill_kv(store)
    full = [tuple(r) for r in _frame(livestate, keyspace, store.name).select("key", "value").collect()]

    def check(condition, keep) -> object:
        # A DataFrame per query: Spark 4.1 keeps a pushed plan for the DataFrame's later queries
        frame = _frame(livestate, keyspace, store.name, pushdown="true").filter(condition)
        assert sorted(tuple(r) for r in frame.select("key", "value").collect()) == sorted(r for r in full if keep(r[0]))
        return frame

    one = check(F.col("key") == "w042", lambda k: k == "w042")
    if kind != "global":
        assert one.rdd.getNumPartitions() == 1  # the key's Cassandra partition only
    check(F.col("key") == "absent", lambda k: False)
    check(F.col("key").isin("w001", "é", "日本", "nope"), lambda k: k in ("w001", "é", "日本"))
    check((F.col("key") >= "w100") & (F.col("key") < "w150"), lambda k: "w100" <= k < "w150")
    check((F.col("key") > "w290") & (F.col("key") <= "éa"), lambda k: b"w290" < k.encode() <= "éa".encode())
    check(F.col("key").startswith("w1"), lambda k: k.startswith("w1"))
    check(F.col("key").like("w2%"), lambda k: k.startswith("w2"))
    check((F.col("key") == "w001") & (F.col("key") > "w002"), lambda k: False)
    check((F.col("key") < "b") | (F.col("key") == "z"), lambda k: k < "b" or k == "z")  # OR: left to Spark
    check((F.col("key") != "w001") & (F.col("value") > 0), lambda k: k != "w001" and dict(full)[k] > 0)


def test_without_pushdown_a_dataframe_stays_right_across_queries(livestate, keyspace, stores):
    store = stores(lambda b: b.partitioned_key_value_store(4))
    truth = _fill_kv(store)
    df = _frame(livestate, keyspace, store.name)
    assert df.filter(F.col("key") == "w042").select("value").collect()[0][0] == truth["w042"]
    assert df.filter(F.col("key") >= "w2").count() == sum(1 for k in truth if k >= "w2")
    assert df.count() == len(truth)  # the whole store, after the filtered queries of the same DataFrame


def test_long_keys_ranges_stay_right_though_not_pushed(livestate, keyspace, stores):
    store = stores(
        lambda b: b.with_key_codec(codecs.LONG).with_value_codec(codecs.STRING).partitioned_key_value_store(3)
    )
    truth = {n: f"v{n}" for n in range(-50, 50)}
    store.put_all(truth.items())
    df = _frame(livestate, keyspace, store.name)
    assert df.schema["key"].dataType.typeName() == "long" and df.schema["value"].dataType.typeName() == "string"
    ranged = df.filter((F.col("key") > -10) & (F.col("key") <= 5)).select("key", "value").collect()
    assert sorted(tuple(r) for r in ranged) == [(n, truth[n]) for n in range(-9, 6)]
    picked = df.filter(F.col("key").isin(-3, 7)).select("key", "value").collect()
    assert sorted(tuple(r) for r in picked) == [(-3, "v-3"), (7, "v7")]


def test_reads_in_several_input_partitions(capsys, livestate, keyspace, stores):
    partitioned = stores(lambda b: b.partitioned_key_value_store(4))
    ring = stores(lambda b: b.global_key_value_store())
    for store in (partitioned, ring):
        _fill_kv(store)
    by_partition = _frame(livestate, keyspace, partitioned.name)
    assert by_partition.rdd.getNumPartitions() == 4  # one per Cassandra partition
    subpartitioned = stores(KV_LAYOUTS["subpartitioned"])
    assert _frame(livestate, keyspace, subpartitioned.name).rdd.getNumPartitions() == 16  # 4 x 4 Cassandra partitions
    assert _frame(livestate, keyspace, partitioned.name, splits=2).rdd.getNumPartitions() == 2
    by_range = _frame(livestate, keyspace, ring.name, splits=8)
    assert by_range.rdd.getNumPartitions() == 8  # token ranges
    for store, frame in ((partitioned, by_partition), (ring, by_range)):
        dumped = _dump(capsys, keyspace, store.name)[1:]
        seen = frame.select("key", "value").collect()
        assert sorted((r.key, str(r.value)) for r in seen) == sorted(map(tuple, dumped))


def test_unknown_store_and_option_are_named(livestate, keyspace):
    with pytest.raises(Exception, match="no store 'nosuchstore'"):
        _frame(livestate, keyspace, "nosuchstore").collect()
    with pytest.raises(Exception, match="unknown option"):
        _frame(livestate, keyspace, "nosuchstore", spilts=4).collect()


def test_a_dataframe_loaded_before_a_relayout_refuses_to_read_the_old_table(livestate, session, keyspace, stores):
    """Its read was planned for the table the store used at load(): after a re-layout that table
    is kept (the way back) but the store's batches go to the new one, so the DataFrame fails with
    a clear error instead of reading stale counts; loaded again, it reads the new table."""
    from statestore.store.builder import open_store
    from statestore.store.relayout import relayout_store

    store = stores(lambda b: b.partitioned_key_value_store(2))
    truth = _fill_kv(store)
    before = _frame(livestate, keyspace, store.name)
    assert before.count() == len(truth)
    moved = relayout_store(session, keyspace, store.name, 4)
    try:
        open_store(session, keyspace, store.name).put("after-the-relayout", 1)
        with pytest.raises(Exception, match=rf"moved from table {moved.old_table} to {moved.new_table}.*load\(\) it"):
            before.count()
        assert _frame(livestate, keyspace, store.name).count() == len(truth) + 1
    finally:
        session.execute(f"DROP TABLE IF EXISTS {keyspace}.{moved.new_table}")
