"""Store options are validated when set, and render to safe CQL."""

from __future__ import annotations

import pytest

from statestore.core import codecs
from statestore.core.errors import CodecError, InvalidNameError, OptionError
from statestore.core.model import StoreSpec, StoreType
from statestore.core.options import TableOptions, compaction_class
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.store.builder import StoreBuilder
from statestore.store.cache import CacheOptions
from statestore.store.key_value import KeyValueStore
from statestore.store.tables import create_cql_for, options_with_compaction


def test_default_table_options_are_ucs_and_the_seeds_lcs_is_one_option_away():
    cql = TableOptions().cql("the comment")
    assert "compaction = {'class': 'UnifiedCompactionStrategy'}" in cql
    assert "default_time_to_live = 0" in cql
    assert "comment = 'the comment'" in cql
    seed = TableOptions.parse({"compaction": "LeveledCompactionStrategy"}).cql("c")
    assert "compaction = {'class': 'LeveledCompactionStrategy'}" in seed


def test_ttl_alias_and_compaction_options_render():
    options = TableOptions.parse(
        {
            "ttl": "3600",
            "compaction": "TimeWindowCompactionStrategy",
            "compaction_options": {"compaction_window_size": 1},
        }
    )
    assert options.default_time_to_live == 3600
    assert "'compaction_window_size': '1'" in options.cql("c")
    assert options.updated({"ttl": 0}).default_time_to_live == 0


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"ttl": -1}, "default_time_to_live must be"),
        ({"ttl": 630_720_001}, "default_time_to_live must be"),
        ({"ttl": True}, "default_time_to_live must be"),
        ({"compaction": "NoSuchStrategy"}, "unknown compaction"),
        ({"compaction_options": {"x'; DROP TABLE t; --": "1"}}, "invalid compaction option"),
        ({"compaction_options": {"size": "1'}"}}, "invalid compaction option"),
        ({"comment": "it's"}, "comment"),
        ({"bloom": 1}, "unknown table option 'bloom'"),
        ({"gc_grace_seconds": "ten"}, "gc_grace_seconds must be"),
    ],
)
def test_bad_table_options_are_refused_with_the_fix(raw, message):
    with pytest.raises(OptionError, match=message):
        TableOptions.parse(raw)


def test_builder_is_immutable_and_does_no_io():
    base = StoreBuilder(None, "clicks").with_keyspace("ks")  # no session needed: nothing runs
    json_values = base.with_value_codec(codecs.JSON)
    assert base.options.value_codec is codecs.LONG
    assert json_values.options.value_codec is codecs.JSON
    spec = json_values.with_table_name_fn(lambda n: f"{n}_kstreams_store").partitioned_key_value_store(8).spec
    assert (spec.table, spec.partitions, spec.value_codec) == ("clicks_kstreams_store", 8, "json")
    assert spec.store_type is StoreType.PARTITIONED_KV
    assert base.global_key_value_store().spec.table == "clicks_store"


def test_a_window_store_keeps_compaction_asked_for_even_when_it_is_the_key_value_default():
    windowing = WindowSpec(60_000, 60_000)
    base = StoreBuilder(None, "clicks").with_keyspace("ks")
    assert base.partitioned_window_store(windowing, 2).table_options is None  # its own default: TWCS
    leveled = base.with_table_options(compaction="LeveledCompactionStrategy").partitioned_window_store(windowing, 2)
    assert leveled.table_options.compaction == "LeveledCompactionStrategy"
    assert base.partitioned_key_value_store(2).table_options == TableOptions()


def test_builder_refuses_bad_options_when_set():
    base = StoreBuilder(None, "clicks")
    with pytest.raises(InvalidNameError):
        StoreBuilder(None, "Clicks!")
    with pytest.raises(InvalidNameError, match="table-name function"):
        base.with_table_name_fn(lambda n: n + "-store")
    with pytest.raises(OptionError, match="must differ"):
        base.with_dml_profile("ddl")
    with pytest.raises(OptionError, match="true or false"):
        base.with_count_all("yes")
    with pytest.raises(CodecError, match="is not a codec"):
        base.with_key_codec(object())
    with pytest.raises(OptionError, match="max_entries"):
        base.with_cache(max_entries=0)
    with pytest.raises(OptionError, match="ttl_s"):
        CacheOptions(ttl_s=0)
    with pytest.raises(ValueError, match="at least 1 partition"):
        base.partitioned_key_value_store(0)


def test_custom_codec_objects_are_accepted():
    class Upper:
        name = "upper"

        def encode(self, value):
            return value.upper().encode()

        def decode(self, data):
            return data.decode()

    spec = StoreBuilder(None, "c").with_key_codec(Upper()).global_key_value_store().spec
    assert spec.key_codec == "upper"


def test_a_registered_store_opens_with_its_recorded_codecs_an_aggregate_stores_included():
    """open_store's builder (no I/O): an aggregate store's value format gives its measures'
    codec, so `get` returns {measure: result}; a custom codec's name still reads as bytes."""
    from statestore.core.aggregation.spec import AggregateSpec
    from statestore.store.builder import _registered

    aggregate = AggregateSpec.parse("n=count(), total=sum(amount)")
    spec = StoreSpec("ks", "orders", StoreType.PARTITIONED_KV, 2, value_codec=aggregate.value_format)
    store = _registered(None, spec, None, False)._open(KeyValueStore, spec)
    assert store.value_codec == aggregate.codec
    assert store._decode_value(aggregate.codec.encode({"n": 2, "total": 1.5})) == {"n": 2, "total": 1.5}
    custom = StoreSpec("ks", "blobs", StoreType.PARTITIONED_KV, 2, key_codec="upper", value_codec="json")
    opened = _registered(None, custom, None, False)._open(KeyValueStore, custom)
    assert (opened.key_codec, opened.value_codec) == (codecs.BYTES, codecs.JSON)


@pytest.mark.parametrize(
    "codec, value",
    [
        (codecs.STRING, "é"),
        (codecs.LONG, -(2**63)),
        (codecs.INT, 2**31 - 1),
        (codecs.BYTES, b"\x00\xff"),
        (codecs.JSON, {"b": [1, None]}),
    ],
)
def test_codecs_round_trip(codec, value):
    assert codec.decode(codec.encode(value)) == value


def test_long_and_int_are_kafkas_big_endian_formats():
    assert codecs.LONG.encode(1) == b"\x00" * 7 + b"\x01"
    assert codecs.INT.encode(-1) == b"\xff" * 4
    with pytest.raises(CodecError, match="signed 32-bit int"):
        codecs.INT.encode(2**31)
    with pytest.raises(CodecError, match="4 bytes"):
        codecs.INT.decode(b"\x00")
    with pytest.raises(CodecError, match="not valid UTF-8 JSON"):
        codecs.JSON.decode(b"{")
    assert codecs.codec_named("long-be64") is codecs.LONG  # the first registry rows' name


@pytest.mark.parametrize(
    "name, expected",
    [
        ("ucs", "UnifiedCompactionStrategy"),
        ("LCS", "LeveledCompactionStrategy"),
        (" stcs ", "SizeTieredCompactionStrategy"),
        ("TimeWindowCompactionStrategy", "TimeWindowCompactionStrategy"),
    ],
)
def test_compaction_short_names_and_class_names_resolve(name, expected):
    assert compaction_class(name) == expected


def test_an_unknown_compaction_is_refused_naming_the_choices():
    with pytest.raises(OptionError, match="unknown compaction 'leveled': use one of lcs, stcs, twcs, ucs"):
        compaction_class("leveled")


def test_a_new_key_value_store_takes_the_compaction_asked_for():
    spec = StoreSpec("ks", "words", StoreType.PARTITIONED_KV, 4)
    assert options_with_compaction(spec, None) is None
    assert options_with_compaction(spec, "UnifiedCompactionStrategy") is None  # the default already
    assert "compaction = {'class': 'UnifiedCompactionStrategy'}" in create_cql_for(spec, None)
    cql = create_cql_for(spec, options_with_compaction(spec, "LeveledCompactionStrategy"))
    assert "compaction = {'class': 'LeveledCompactionStrategy'}" in cql
    assert "UnifiedCompactionStrategy" not in cql


def test_a_window_store_keeps_its_twcs_windows_unless_another_class_is_asked_for():
    spec = StoreSpec("ks", "w", StoreType.PARTITIONED_WINDOW, 4, windowing=WindowSpec(60_000))
    assert options_with_compaction(spec, "TimeWindowCompactionStrategy") is None
    assert "compaction_window_unit" in create_cql_for(spec, None)
    other = create_cql_for(spec, options_with_compaction(spec, "UnifiedCompactionStrategy"))
    assert "compaction = {'class': 'UnifiedCompactionStrategy'}" in other
    assert "compaction_window_unit" not in other  # TWCS's sub-options would be refused by UCS


def test_a_session_store_keeps_its_twcs_windows_unless_another_class_is_asked_for():
    spec = StoreSpec("ks", "s", StoreType.PARTITIONED_SESSION, 4, windowing=SessionSpec(300_000, 0, None))
    assert options_with_compaction(spec, None) is None
    assert options_with_compaction(spec, "TimeWindowCompactionStrategy") is None
    assert "compaction_window_unit" in create_cql_for(spec, None)
    leveled = create_cql_for(spec, options_with_compaction(spec, "LeveledCompactionStrategy"))
    assert "compaction = {'class': 'LeveledCompactionStrategy'}" in leveled
