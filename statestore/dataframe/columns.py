"""The DataFrame's columns by store type, and stored rows turned into Arrow record batches with
the registry's codecs. No I/O.

Every store has key, value, batch_id and time; a window store adds window_start and
window_end, a session store session_start and session_end, a versioned store valid_from and
valid_to (null: the current version). Times are Spark timestamps (UTC instants; the store keeps
epoch milliseconds). Keys and values take the Spark type of their codec: `string` a string,
`long` a bigint, `int` an int, `bytes` (and any custom codec, which readers cannot know) binary,
`json` the JSON text as a string (parse it with `from_json`).

An aggregate store (its value codec `aggregate:MEASURES`) has a column per measure in place of
`value`, named after it (a measure named like another column, `key`, `batch_id` or `time`, is
as every reader names it: statestore.present.aggregates), typed by its
aggregation: count a bigint; sum_int a decimal(38,0), exact where a long would overflow (each
input fits a long, so a sum needs 2^63 inputs to reach 38 digits; one past them is refused as
stored data, never cut); sum, min, max and distinct (the sketch's estimate) a double; latest
the field's JSON text as a string. min, max and latest are null before any input.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from statestore.core import codecs
from statestore.core.aggregation.spec import AGGREGATE_FORMAT_PREFIX, AggregateSpec
from statestore.core.codecs import decode_stored
from statestore.core.errors import StoredDataError
from statestore.core.model import OPEN_END, SessionEntry, StoreSpec, Version, WindowedEntry


@dataclass(frozen=True)
class CodecColumn:
    """How a key or value codec shows in Spark: its type, whether Spark orders the column as
    Cassandra orders the stored bytes (unsigned bytes: then key ranges can be pushed to the
    table), and the stored bytes of a Spark value (for pushed filters)."""

    codec: str
    spark_type: DataType
    ordered: bool

    def raw_of(self, value) -> bytes:
        """The stored bytes of the Spark value `value`; TypeError or ValueError if it cannot be one."""
        if self.codec in ("long", "int"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"a {self.codec} key is an int, got {type(value).__name__}")
            return codecs.BUILT_IN[self.codec].encode(value)
        if isinstance(self.spark_type, StringType):
            if not isinstance(value, str):
                raise TypeError(f"a {self.codec} key is a string, got {type(value).__name__}")
            return value.encode("utf-8")  # json too: the column holds the stored text itself
        if not isinstance(value, bytes | bytearray):
            raise TypeError(f"a {self.codec} key is binary, got {type(value).__name__}")
        return bytes(value)

    def arrow(self, raws: list[bytes | None], store: str, part: str) -> pa.Array:
        """The Arrow column of stored bytes `raws` (None: null), decoded with this codec; the
        codec's StoredDataError for bytes it cannot decode."""
        try:
            return self._arrow(raws)
        except (ValueError, pa.ArrowInvalid):
            codec = codecs.BUILT_IN.get(self.codec, codecs.BYTES)
            for raw in raws:  # name the bad entry as every reader of the store does
                if raw is not None:
                    decode_stored(codec, raw, store, part)
            raise

    def _arrow(self, raws: list[bytes | None]) -> pa.Array:
        if self.codec in ("long", "int"):
            width = 8 if self.codec == "long" else 4
            nulls = [raw is None for raw in raws]
            filled = [b"\0" * width if raw is None else raw for raw in raws]
            if any(len(raw) != width for raw in filled):
                raise ValueError(f"a {self.codec} value is {width} bytes")
            numbers = np.frombuffer(b"".join(filled), dtype=f">i{width}").astype(f"<i{width}")
            arrow_type = pa.int64() if width == 8 else pa.int32()
            return pa.array(numbers, type=arrow_type, mask=np.array(nulls) if any(nulls) else None)
        binary = pa.array(raws, type=pa.binary())
        if isinstance(self.spark_type, StringType):
            return binary.cast(pa.string())  # checks the UTF-8
        return binary


_CODEC_COLUMNS = {
    "string": CodecColumn("string", StringType(), True),
    "json": CodecColumn("json", StringType(), True),
    "long": CodecColumn("long", LongType(), False),
    "int": CodecColumn("int", IntegerType(), False),
    "bytes": CodecColumn("bytes", BinaryType(), True),
}


def codec_column(name: str) -> CodecColumn:
    """The column of a registered codec name; a custom codec's name reads as raw bytes."""
    name = codecs.canonical_name(name)
    return _CODEC_COLUMNS.get(name, CodecColumn(name, BinaryType(), True))


# The columns between key and value, by store kind: each a time span of the row.
def span_columns(spec: StoreSpec) -> tuple[str, str] | None:
    if spec.store_type.windowed:
        return ("window_start", "window_end")
    if spec.store_type.sessioned:
        return ("session_start", "session_end")
    if spec.store_type.versioned:
        return ("valid_from", "valid_to")
    return None


# The Spark type of each aggregation's result, and its Arrow column of results.
_SUM_INT = DecimalType(38, 0)
_MEASURE_TYPES: dict[str, DataType] = {
    "count": LongType(),
    "sum": DoubleType(),
    "sum_int": _SUM_INT,
    "min": DoubleType(),
    "max": DoubleType(),
    "distinct": DoubleType(),
    "latest": StringType(),
}
_ROW_COLUMNS = ("key", "batch_id", "time")


def aggregate_spec(spec: StoreSpec) -> AggregateSpec | None:
    """The measures of an aggregate store (its registry value format names them), else None."""
    if not spec.value_codec.startswith(AGGREGATE_FORMAT_PREFIX):
        return None
    return AggregateSpec.parse(spec.value_codec.removeprefix(AGGREGATE_FORMAT_PREFIX))


def measure_columns(measures: AggregateSpec) -> tuple[str, ...]:
    """The column of each measure: its name (none is named like the store's other columns:
    statestore.core.aggregation.spec.RESERVED_NAMES)."""
    return tuple(m.name for m in measures.measures)


def schema_for(spec: StoreSpec) -> StructType:
    """The DataFrame schema of a store (see the module doc)."""
    fields = [StructField("key", codec_column(spec.key_codec).spark_type, False)]
    span = span_columns(spec)
    if span is not None:
        fields.append(StructField(span[0], TimestampType(), False))
        # valid_to is null for the current version (its stored end is the open end, 2^63 - 1)
        fields.append(StructField(span[1], TimestampType(), spec.store_type.versioned))
    measures = aggregate_spec(spec)
    if measures is None:
        fields.append(StructField("value", codec_column(spec.value_codec).spark_type, True))  # null: a deleted version
    else:
        names = measure_columns(measures)
        fields += [StructField(n, _MEASURE_TYPES[m.kind], True) for n, m in zip(names, measures.measures, strict=True)]
    fields += [
        StructField("batch_id", LongType(), True),
        StructField("time", TimestampType(), True),
    ]
    return StructType(fields)


class MeasureColumns:
    """An aggregate store's stored values as an Arrow column per measure (see the module doc)."""

    def __init__(self, measures: AggregateSpec, spec: StoreSpec) -> None:
        self.measures = measures
        self.spec = spec
        self.names = measure_columns(measures)

    def arrays(self, rows: list) -> list[pa.Array]:
        unpacked = [self._unpack(row.value) for row in rows]
        return [
            self._array(index, measure, [accumulators[index] for accumulators in unpacked], rows)
            for index, measure in enumerate(self.measures.measures)
        ]

    def _unpack(self, raw: bytes) -> tuple:
        try:
            return self.measures.unpack(raw)
        except ValueError:  # CodecError: named as every reader of the store names it
            decode_stored(self.measures.codec, raw, self.spec.name)
            raise

    def _array(self, index: int, measure, accumulators: list, rows: list) -> pa.Array:
        kind = measure.aggregation
        if measure.kind == "latest":  # the field's JSON text, exactly as it came
            return pa.array([None if a is None else a.json for a in accumulators], type=pa.string())
        results = [kind.finish(a) for a in accumulators]
        if measure.kind == "count":
            return pa.array(results, type=pa.int64())
        if measure.kind == "sum_int":
            limit = 10**_SUM_INT.precision
            for result, row in zip(results, rows, strict=True):
                if not -limit < result < limit:
                    raise StoredDataError(
                        f"store '{self.spec.name}': measure {self.names[index]} of key "
                        f"{bytes(row.key)[:100].decode('utf-8', 'replace')!r} is "
                        f"{result}, which does not fit decimal(38,0) (more than 38 digits): read it with the library "
                        "(statestore.store.builder.open_store) or the CLI, which show it exactly"
                    )
            return pa.array(results, type=pa.decimal128(_SUM_INT.precision, 0))
        return pa.array(results, type=pa.float64())


def _timestamps(millis: list[int | None]) -> pa.Array:
    micros = pc.multiply_checked(pa.array(millis, type=pa.int64()), 1000)
    return micros.cast(pa.timestamp("us", tz="UTC"))


class BatchBuilder:
    """Stored rows of one store (Entry, Version, WindowedEntry or SessionEntry) as Arrow record
    batches of the store's schema."""

    def __init__(self, spec: StoreSpec) -> None:
        self.spec = spec
        self.key = codec_column(spec.key_codec)
        self.value = codec_column(spec.value_codec)
        measures = aggregate_spec(spec)
        self.measures = None if measures is None else MeasureColumns(measures, spec)
        self.schema = to_arrow_schema(schema_for(spec))
        self._span = self._span_of(spec)

    @staticmethod
    def _span_of(spec: StoreSpec):
        """The function giving a row's (start, end) in epoch ms (end None: open), or None."""
        if spec.store_type.windowed:
            size = spec.windowing.size_ms

            def window(row: WindowedEntry) -> tuple[int, int]:
                return row.start_ms, row.start_ms + size

            return window
        if spec.store_type.sessioned:

            def session(row: SessionEntry) -> tuple[int, int]:
                return row.start_ms, row.end_ms

            return session
        if spec.store_type.versioned:

            def validity(row: Version) -> tuple[int, int | None]:
                return row.valid_from, None if row.valid_to == OPEN_END else row.valid_to

            return validity
        return None

    def batch(self, rows: list) -> pa.RecordBatch:
        store = self.spec.name
        columns = [self.key.arrow([r.key for r in rows], store, "key")]
        if self._span is not None:
            spans = list(map(self._span, rows))
            columns += [_timestamps([s[0] for s in spans]), _timestamps([s[1] for s in spans])]
        if self.measures is None:
            columns.append(self.value.arrow([r.value for r in rows], store, "value"))
        else:
            columns += self.measures.arrays(rows)
        columns += [
            pa.array([r.batch_id for r in rows], type=pa.int64()),
            _timestamps([r.time_ms for r in rows]),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def batches(self, rows: Iterable, size: int) -> Iterator[pa.RecordBatch]:
        """`rows` in record batches of `size` rows (the last one smaller); none for no rows."""
        rows = iter(rows)
        while chunk := list(islice(rows, size)):
            yield self.batch(chunk)
