"""The DataFrame's columns by store type and the Arrow batches built from stored rows
(statestore.dataframe.columns): no Spark session, no Cassandra."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from statestore.core.errors import StoredDataError
from statestore.core.model import OPEN_END, Entry, SessionEntry, StoreSpec, Version, WindowedEntry
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.dataframe.columns import BatchBuilder, codec_column, schema_for

US = 1000  # microseconds per millisecond


def _names(spec: StoreSpec) -> list[str]:
    return [f.name for f in schema_for(spec).fields]


def test_columns_by_store_type():
    assert _names(StoreSpec("ks", "a", "global-kv", 1)) == ["key", "value", "batch_id", "time"]
    versioned = StoreSpec("ks", "a", "global-versioned", 1)
    assert _names(versioned) == ["key", "valid_from", "valid_to", "value", "batch_id", "time"]
    windows = StoreSpec("ks", "a", "partitioned-window", 2, windowing=WindowSpec(1000))
    assert _names(windows) == ["key", "window_start", "window_end", "value", "batch_id", "time"]
    sessions = StoreSpec("ks", "a", "partitioned-session", 2, windowing=SessionSpec(1000))
    assert _names(sessions) == ["key", "session_start", "session_end", "value", "batch_id", "time"]


@pytest.mark.parametrize(
    "codec, spark_type, ordered",
    [
        ("string", "string", True),
        ("utf8", "string", True),
        ("json", "string", True),
        ("long", "long", False),
        ("long-be64", "long", False),
        ("int", "integer", False),
        ("bytes", "binary", True),
        ("avro", "binary", True),
    ],
)
def test_codecs_give_spark_types(codec, spark_type, ordered):
    column = codec_column(codec)
    assert (column.spark_type.typeName(), column.ordered) == (spark_type, ordered)


def test_key_value_rows_decode_with_the_codecs():
    spec = StoreSpec("ks", "a", "partitioned-kv", 4, key_codec="string", value_codec="long")
    rows = [Entry("é".encode(), (-5).to_bytes(8, "big", signed=True), 3, 1_000), Entry(b"b", (7).to_bytes(8, "big"))]
    batch = BatchBuilder(spec).batch(rows)
    assert batch.schema == BatchBuilder(spec).schema
    assert batch.to_pydict()["key"] == ["é", "b"] and batch.to_pydict()["value"] == [-5, 7]
    assert batch.column("batch_id").to_pylist() == [3, None]
    assert batch.column("time").cast(pa.int64()).to_pylist() == [1_000 * US, None]


def test_versions_show_validity_with_an_open_end_as_null_and_tombstones_as_null_values():
    spec = StoreSpec("ks", "a", "global-versioned", 1, value_codec="int")
    rows = [Version(b"k", (4).to_bytes(4, "big"), 100, 200), Version(b"k", None, 200, OPEN_END)]
    batch = BatchBuilder(spec).batch(rows).to_pydict()
    assert batch["value"] == [4, None]
    assert [t is None for t in batch["valid_to"]] == [False, True]


def test_windows_and_sessions_show_their_spans():
    windows = StoreSpec("ks", "a", "partitioned-window", 2, windowing=WindowSpec(60_000))
    batch = BatchBuilder(windows).batch([WindowedEntry(b"k", 120_000, (1).to_bytes(8, "big"))])
    spans = [batch.column(c).cast(pa.int64()).to_pylist() for c in ("window_start", "window_end")]
    assert spans == [[120_000 * US], [180_000 * US]]
    sessions = StoreSpec("ks", "a", "partitioned-session", 2, windowing=SessionSpec(1000), value_codec="json")
    batch = BatchBuilder(sessions).batch([SessionEntry(b"k", 5, 9, json.dumps({"n": 1}).encode())])
    assert batch.column("session_end").cast(pa.int64()).to_pylist() == [9 * US]
    assert batch.column("value").to_pylist() == ['{"n": 1}']  # the JSON text


def test_undecodable_bytes_name_the_store():
    spec = StoreSpec("ks", "broken", "partitioned-kv", 4)
    with pytest.raises(StoredDataError, match="store 'broken'"):
        BatchBuilder(spec).batch([Entry(b"k", b"short")])
    with pytest.raises(StoredDataError, match="key"):
        BatchBuilder(spec).batch([Entry(b"\xff\xfe", (1).to_bytes(8, "big"))])


def test_batches_cut_rows_by_size():
    spec = StoreSpec("ks", "a", "global-kv", 1, value_codec="bytes")
    rows = (Entry(b"k%d" % i, b"v") for i in range(7))
    assert [b.num_rows for b in BatchBuilder(spec).batches(rows, 3)] == [3, 3, 1]
    assert list(BatchBuilder(spec).batches(iter(()), 3)) == []


def test_stored_bytes_of_spark_values():
    assert codec_column("string").raw_of("é") == "é".encode()
    assert codec_column("json").raw_of('{"a":1}') == b'{"a":1}'
    assert codec_column("long").raw_of(-1) == b"\xff" * 8
    assert codec_column("bytes").raw_of(bytearray(b"\x01")) == b"\x01"
    for codec, wrong in (("string", 1), ("long", "1"), ("long", True), ("bytes", "x")):
        with pytest.raises(TypeError):
            codec_column(codec).raw_of(wrong)


AGGREGATE = "aggregate:n=count(), total=sum(amount), units=sum_int(qty), lo=min(amount), last=latest(city), "
AGGREGATE += "users=distinct(user), hi=max(amount)"


def test_an_aggregate_store_has_a_typed_column_per_measure():
    spec = StoreSpec("ks", "a", "partitioned-kv", 4, value_codec=AGGREGATE)
    fields = {f.name: f.dataType.simpleString() for f in schema_for(spec).fields}
    assert fields == {
        "key": "string",
        "n": "bigint",
        "total": "double",
        "units": "decimal(38,0)",  # sum_int: exact, past a long
        "lo": "double",
        "last": "string",  # latest: the field's JSON text
        "users": "double",  # distinct: the sketch's estimate
        "hi": "double",
        "batch_id": "bigint",
        "time": "timestamp",
    }


def test_aggregate_rows_decode_to_each_measures_result():
    from datasketches import hll_sketch, tgt_hll_type

    from statestore.core.aggregation.kinds.latest import LatestValue
    from statestore.core.codecs import codec_named
    from statestore.present import aggregates

    spec = StoreSpec("ks", "a", "partitioned-kv", 4, value_codec=AGGREGATE)
    codec = codec_named(AGGREGATE)
    sketch = hll_sketch(12, tgt_hll_type.HLL_8)
    sketch.update("u1")
    full = {"n": 3, "total": 1.5, "units": 2**70, "lo": -2.0, "last": LatestValue(1, 0, 2, '{"a": [1]}')}
    rows = [
        Entry(b"k", codec.encode(full | {"users": sketch.serialize_compact(), "hi": 4.0}), 7, 1_000),
        Entry(b"z", codec.encode({"n": 1}), 8, 2_000),  # the rest: identities (no min, max, latest)
    ]
    batch = BatchBuilder(spec).batch(rows).to_pydict()
    assert batch["n"] == [3, 1] and batch["total"] == [1.5, 0.0] and batch["units"] == [2**70, 0]
    assert batch["lo"] == [-2.0, None] and batch["last"] == ['{"a": [1]}', None]
    assert batch["users"] == [pytest.approx(1.0), 0.0] and batch["hi"] == [4.0, None]
    assert batch["batch_id"] == [7, 8]
    # the DataFrame names columns as the other readers do
    assert [f.name for f in schema_for(spec).fields][1:-2] == list(aggregates.columns(aggregates.spec_of(codec)))


def test_an_aggregate_value_the_measures_cannot_read_is_named_and_a_sum_past_38_digits_refused():
    spec = StoreSpec("ks", "orders", "partitioned-kv", 4, value_codec="aggregate:n=count(), units=sum_int(qty)")
    with pytest.raises(StoredDataError, match="store 'orders' holds a value"):
        BatchBuilder(spec).batch([Entry(b"k", b"\x00\x01", 1, 1)])
    from statestore.core.codecs import codec_named

    huge = codec_named(spec.value_codec).encode({"n": 1, "units": 10**38})
    with pytest.raises(StoredDataError, match=r"units of key .* does not fit decimal\(38,0\)"):
        BatchBuilder(spec).batch([Entry(b"k", huge, 1, 1)])
