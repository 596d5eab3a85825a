"""The operation table of docs/stores.md, on the real Cassandra: every key-value operation for
every key-value store type and codec pair, with unsupported cells raising the documented error."""

from __future__ import annotations

import asyncio
import logging

import pytest

from statestore.core import codecs
from statestore.core.errors import CodecError, StoreMismatchError, UnsupportedOperationError, ValueTooLargeError
from statestore.core.model import StoreType
from statestore.store.builder import StoreBuilder, open_store
from statestore.store.cache import CacheOptions


class PaddedNumber:
    """A user's own key codec: non-negative ints as zero-padded text (so byte order is number order)."""

    name = "padded-number"

    def encode(self, value: int) -> bytes:
        return f"{value:012d}".encode()

    def decode(self, data: bytes) -> int:
        return int(bytes(data).decode())


class Pair:
    """A user's own value codec: (text, int) pairs as 'text|int'."""

    name = "pair"

    def encode(self, value: tuple[str, int]) -> bytes:
        return f"{value[0]}|{value[1]}".encode()

    def decode(self, data: bytes) -> tuple[str, int]:
        text, number = bytes(data).decode().rsplit("|", 1)
        return text, int(number)


# (key codec, value codec, keys, value of the i-th key)
CODEC_CASES = {
    "own-own": (PaddedNumber(), Pair(), [0, 1, 9, 10, 11, 99, 100, 123456], lambda i: (f"v|{i}", -i)),
    "string-long": (codecs.STRING, codecs.LONG, ["", "a", "ab", "abc", "b", "ba", "é", "z"], lambda i: i * 1000 - 3),
    "long-json": (codecs.LONG, codecs.JSON, [-5, -1, 0, 1, 2, 255, 256, 2**40], lambda i: {"i": i, "l": [i, "x"]}),
    "int-bytes": (codecs.INT, codecs.BYTES, [0, 1, 7, 8, 9, 100, -1, 2**31 - 1], lambda i: bytes([i]) * (i + 1)),
    "bytes-string": (codecs.BYTES, codecs.STRING, [b"\x00", b"\x00\x01", b"\x01", b"\xff", b"\xff\xff"], str),
    "json-int": (codecs.JSON, codecs.INT, [["a", 1], {"k": 1}, "s", 3, [1, 2]], lambda i: -i),
}
KV_TYPES = [StoreType.PARTITIONED_KV, StoreType.GLOBAL_KV]
# (store type, sub-partitions): every key-value layout, partitioned-kv with and without sub-partitions.
KV_LAYOUTS = [(StoreType.PARTITIONED_KV, 1), (StoreType.PARTITIONED_KV, 8), (StoreType.GLOBAL_KV, 1)]


def _layout_id(store_type: StoreType, subpartitions: int) -> str:
    return store_type.value + (f"-x{subpartitions}" if subpartitions > 1 else "")


def _build(session, keyspace, store_type: StoreType, case: str, subpartitions: int = 1):
    key_codec, value_codec, keys, value_of = CODEC_CASES[case]
    layout = store_type.name.lower() if subpartitions == 1 else f"sub{subpartitions}"
    name = f"conf_{layout}_{case.replace('-', '_')}"
    builder = (
        StoreBuilder(session, name).with_keyspace(keyspace).with_key_codec(key_codec).with_value_codec(value_codec)
    )
    if store_type is StoreType.PARTITIONED_KV:
        store = builder.partitioned_key_value_store(partitions=3, subpartitions=subpartitions)
    else:
        store = builder.global_key_value_store()
    store.create()
    # The empty string cannot be a Cassandra key: its rejection is part of the table below.
    keys = [k for k in keys if k != ""]
    return store, keys, value_of


def _absent(store, keys):
    """A key of the store's key type that the loaded store does not hold."""
    candidates = {codecs.STRING: "absent", codecs.LONG: 7, codecs.INT: 3, codecs.BYTES: b"\x02"}
    absent = candidates.get(store.key_codec, ["absent"] if store.key_codec is codecs.JSON else 77)
    assert absent not in keys
    return absent


def _sorted_model(store, keys, value_of) -> list[tuple]:
    """The reference: every (key, value) in encoded-key byte order, as Cassandra orders blobs."""
    return sorted(((k, value_of(i)) for i, k in enumerate(keys)), key=lambda kv: store.key_codec.encode(kv[0]))


@pytest.fixture(
    params=[(t, n, c) for t, n in KV_LAYOUTS for c in CODEC_CASES], ids=lambda p: f"{_layout_id(p[0], p[1])}-{p[2]}"
)
def loaded(request, session, keyspace):
    store_type, subpartitions, case = request.param
    store, keys, value_of = _build(session, keyspace, store_type, case, subpartitions)
    store.put_all([(k, value_of(i)) for i, k in enumerate(keys)])
    yield store, keys, value_of
    session.execute(f"TRUNCATE {keyspace}.{store.spec.table}")


def test_point_operations(loaded):
    store, keys, value_of = loaded
    for i, key in enumerate(keys):
        assert store.get(key) == value_of(i)
    # The HTTP API's asynchronous get: the same answers, present and absent.
    assert asyncio.run(store.get_async(keys[-1])) == value_of(len(keys) - 1)
    assert asyncio.run(store.get_async(_absent(store, keys))) is None
    first = keys[0]
    assert store.put_if_absent(first, value_of(5)) == value_of(0)  # exists: returns it, writes nothing
    assert store.get(first) == value_of(0)
    assert store.delete(first) == value_of(0)
    assert store.get(first) is None
    assert store.delete(first) is None
    assert store.put_if_absent(first, value_of(5)) is None  # absent: written
    assert store.get(first) == value_of(5)
    store.put(first, value_of(6))
    assert store.get(first) == value_of(6)
    store.put(first, None)  # a None value deletes, as in Kafka Streams
    assert store.get(first) is None


def test_all_and_reverse_all_in_key_byte_order(loaded):
    store, keys, value_of = loaded
    expected = _sorted_model(store, keys, value_of)
    assert list(store.all()) == expected
    assert list(store.reverse_all()) == expected[::-1]


def test_ranges_and_prefix_or_the_documented_error(loaded):
    store, keys, value_of = loaded
    expected = _sorted_model(store, keys, value_of)
    low, high = expected[1][0], expected[-2][0]
    if store.spec.store_type is StoreType.GLOBAL_KV:
        for call in (
            lambda: list(store.range(low, high)),
            lambda: list(store.reverse_range(low, high)),
            lambda: list(store.prefix_scan(low)),
        ):
            with pytest.raises(UnsupportedOperationError, match=r"global-kv store.*Use all"):
                call()
        return
    assert list(store.range(low, high)) == expected[1:-1]
    assert list(store.reverse_range(low, high)) == expected[1:-1][::-1]
    assert list(store.range(high, low)) == []  # from > to: nothing, as in Kafka Streams
    assert list(store.range(low, low)) == [expected[1]]
    prefix = store.key_codec.encode(low)[:1]
    by_prefix = [kv for kv in expected if store.key_codec.encode(kv[0]).startswith(prefix)]
    assert list(store.prefix_scan(prefix, codecs.BYTES)) == by_prefix


def test_counts(loaded, caplog):
    store, keys, _ = loaded
    exact = open_store(store.session, store.spec.keyspace, store.name, count_all=True)
    with caplog.at_level(logging.WARNING):
        assert exact.approximate_num_entries() == len(keys)
    assert "SELECT COUNT(*)" in caplog.text
    # Without the opt-in: Cassandra's estimate, which knows nothing of unflushed data.
    assert store.approximate_num_entries() >= 0


def test_reopened_store_decodes_with_its_recorded_codecs(loaded):
    store, keys, value_of = loaded
    again = open_store(store.session, store.spec.keyspace, store.name)
    if isinstance(store.key_codec, PaddedNumber):  # a custom codec is unknown to readers: raw bytes
        assert (again.key_codec.name, again.value_codec.name) == ("bytes", "bytes")
        raw_key, raw_value = store.key_codec.encode(keys[-1]), store.value_codec.encode(value_of(len(keys) - 1))
        assert again.get(raw_key) == raw_value
        return
    assert (again.key_codec.name, again.value_codec.name) == (store.key_codec.name, store.value_codec.name)
    assert again.get(keys[-1]) == value_of(len(keys) - 1)


def test_bad_input_is_refused_before_anything_is_written(session, keyspace):
    store, _, _ = _build(session, keyspace, StoreType.PARTITIONED_KV, "string-long")
    with pytest.raises(ValueTooLargeError, match="empty key"):
        store.put("", 1)
    with pytest.raises(ValueTooLargeError, match="65535-byte key limit"):
        store.put("x" * 65536, 1)
    with pytest.raises(CodecError, match="long codec takes int"):
        store.put_all([("fine", 1), ("bad", "not a number")])
    assert store.get("fine") is None  # the batch was refused as a whole
    with pytest.raises(CodecError, match="does not fit a signed 64-bit long"):
        store.put("big", 2**63)


@pytest.mark.parametrize(("store_type", "subpartitions"), KV_LAYOUTS, ids=lambda p: str(p))
def test_put_all_with_a_key_given_twice_ends_with_its_last_value(session, keyspace, store_type, subpartitions):
    store, _, _ = _build(session, keyspace, store_type, "string-long", subpartitions)
    # 5 then 3: equal write timestamps would let Cassandra keep the larger bytes (5).
    store.put_all([("twice", 5), ("twice", 3), ("gone", None), ("gone", 7), ("back", 1), ("back", None)])
    assert (store.get("twice"), store.get("gone"), store.get("back")) == (3, 7, None)
    session.execute(f"TRUNCATE {keyspace}.{store.spec.table}")


def test_a_custom_ddl_profile_creates_the_whole_schema(cassandra_config, keyspace):
    """A user's cluster with its own profile names (and no "ddl" profile): every schema step
    of create() runs with the builder's DDL profile."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile

    from statestore.conn.cassandra import DDL_PROFILE

    profiles = {EXEC_PROFILE_DEFAULT: ExecutionProfile(), "schema_all": ExecutionProfile()}
    cluster = Cluster(list(cassandra_config.hosts), port=cassandra_config.port, execution_profiles=profiles)
    try:
        own = cluster.connect()
        assert DDL_PROFILE not in cluster.profile_manager.profiles
        store = StoreBuilder(own, "custom_ddl").with_keyspace(keyspace).with_ddl_profile("schema_all")
        store = store.partitioned_key_value_store(partitions=2).create()
        store.put("k", 1)
        assert store.get("k") == 1
    finally:
        cluster.shutdown()


def test_reopening_with_another_layout_or_codec_is_refused(session, keyspace):
    store, _, _ = _build(session, keyspace, StoreType.PARTITIONED_KV, "string-long")
    base = StoreBuilder(session, store.name).with_keyspace(keyspace)
    with pytest.raises(StoreMismatchError, match="partition"):
        base.partitioned_key_value_store(partitions=5).create()
    with pytest.raises(StoreMismatchError, match="json values"):
        base.with_value_codec(codecs.JSON).partitioned_key_value_store(partitions=3).create()
    with pytest.raises(StoreMismatchError, match=r"x 1 sub-partition.*with 3 x 4"):
        base.partitioned_key_value_store(partitions=3, subpartitions=4).create()


def test_cached_reads_are_stale_until_the_ttl_and_own_writes_evict(session, keyspace):
    store, _, _ = _build(session, keyspace, StoreType.PARTITIONED_KV, "string-long")
    cached = open_store(session, keyspace, store.name, cache=CacheOptions(max_entries=100, ttl_s=60))
    store.put("hot", 1)
    assert cached.get("hot") == 1
    store.put("hot", 2)  # another writer: the cache does not see it within its TTL
    assert cached.get("hot") == 1
    assert cached.cache.hits == 1
    cached.put("hot", 3)  # a write through the cached store evicts the key
    assert cached.get("hot") == 3


def test_many_workers_creating_one_store_at_once_agree(session, keyspace):
    from concurrent.futures import ThreadPoolExecutor

    from statestore.store.book import registry

    def create(partitions: int):
        builder = StoreBuilder(session, "conf_race").with_keyspace(keyspace)
        try:
            return builder.partitioned_key_value_store(partitions=partitions).create().spec.partitions
        except StoreMismatchError:
            return "refused"

    # Eight workers ask for 4 partitions, two for 6: exactly one layout wins and the rest of
    # the requests for the other layout are refused, never silently applied.
    with ThreadPoolExecutor(10) as pool:
        outcomes = list(pool.map(create, [4] * 8 + [6] * 2))
    registered = registry.lookup(session, keyspace, "conf_race").partitions
    assert registered in (4, 6)
    assert set(outcomes) <= {registered, "refused"}
    assert outcomes.count("refused") == (2 if registered == 4 else 8)


VERSIONED_TYPES = [StoreType.PARTITIONED_VERSIONED, StoreType.GLOBAL_VERSIONED]
VERSIONED_LAYOUTS = [
    (StoreType.PARTITIONED_VERSIONED, 1),
    (StoreType.PARTITIONED_VERSIONED, 8),
    (StoreType.GLOBAL_VERSIONED, 1),
]


@pytest.mark.parametrize("case", list(CODEC_CASES))
@pytest.mark.parametrize(("store_type", "subpartitions"), VERSIONED_LAYOUTS, ids=lambda p: str(p))
def test_versioned_operation_table(session, keyspace, store_type, subpartitions, case):
    key_codec, value_codec, keys, value_of = CODEC_CASES[case]
    keys = [k for k in keys if k != ""]
    layout = store_type.name.lower()[:4] + (f"x{subpartitions}" if subpartitions > 1 else "")
    builder = (
        StoreBuilder(session, f"confv_{layout}_{case.replace('-', '_')}")
        .with_keyspace(keyspace)
        .with_key_codec(key_codec)
        .with_value_codec(value_codec)
    )
    if store_type is StoreType.PARTITIONED_VERSIONED:
        store = builder.partitioned_versioned_store(partitions=3, subpartitions=subpartitions).create()
    else:
        store = builder.global_versioned_store().create()
    key = keys[0]
    assert store.put(key, value_of(1), 1_000) is None  # the current version
    assert store.put(key, value_of(2), 2_000) is None
    assert store.put(key, value_of(3), 1_500) == 2_000  # inside [1000, 2000): splits it
    assert store.get(key).value == value_of(2)
    assert store.get(key, as_of=1_499).value == value_of(1)
    assert store.get(key, as_of=1_500).value == value_of(3)
    assert store.get(key, as_of=999) is None
    assert [(r.value, r.valid_from, r.valid_to) for r in store.history(key)] == [
        (value_of(1), 1_000, 1_500),
        (value_of(3), 1_500, 2_000),
        (value_of(2), 2_000, None),
    ]
    assert asyncio.run(store.get_async(key)).value == value_of(2)  # the HTTP API's asynchronous get
    assert store.delete(key, 3_000).value == value_of(2)
    assert store.get(key) is None and asyncio.run(store.get_async(key)) is None
    assert store.get(key, as_of=2_999).value == value_of(2)
    for i, other in enumerate(keys[1:], start=1):
        store.put(other, value_of(i), 10)
    expected = sorted(((k, value_of(i)) for i, k in enumerate(keys) if i), key=lambda kv: key_codec.encode(kv[0]))
    assert list(store.all()) == expected  # current values only: the deleted key is gone
    assert list(store.reverse_all()) == expected[::-1]
    with pytest.raises(UnsupportedOperationError):
        store.put_if_absent(key, value_of(1))
    if store_type is StoreType.GLOBAL_VERSIONED:
        with pytest.raises(UnsupportedOperationError, match="Use all"):
            list(store.range(expected[0][0], expected[-1][0]))
    else:
        assert list(store.range(expected[0][0], expected[-1][0])) == expected
        prefix = key_codec.encode(expected[0][0])[:1]
        assert list(store.prefix_scan(prefix, codecs.BYTES)) == [
            kv for kv in expected if key_codec.encode(kv[0]).startswith(prefix)
        ]
