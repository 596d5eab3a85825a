"""The DataFrame's columns by store type, and stored rows turned into Arrow record batches with
the registry's codecs. No I/O.

Every store has key, value, batch_id and time; a window store adds window_start and
window_end, a session store session_start and session_end, a versioned store valid_from and
valid_to (null: the current version). Times are Spark timestamps (UTC instants; the store keeps
epoch milliseconds). Keys and values take the Spark type of their codec: `string` a string,
`long` a bigint, `int` an int, `bytes` (and any custom codec, which readers cannot know) binary,
`json` the JSON text as a string (parse it with `from_json`).
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
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from statestore.core import codecs
from statestore.core.codecs import decode_stored
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


def schema_for(spec: StoreSpec) -> StructType:
    """The DataFrame schema of a store (see the module doc)."""
    fields = [StructField("key", codec_column(spec.key_codec).spark_type, False)]
    span = span_columns(spec)
    if span is not None:
        fields.append(StructField(span[0], TimestampType(), False))
        # valid_to is null for the current version (its stored end is the open end, 2^63 - 1)
        fields.append(StructField(span[1], TimestampType(), spec.store_type.versioned))
    fields += [
        StructField("value", codec_column(spec.value_codec).spark_type, True),  # null: a deleted version
        StructField("batch_id", LongType(), True),
        StructField("time", TimestampType(), True),
    ]
    return StructType(fields)


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
        columns += [
            self.value.arrow([r.value for r in rows], store, "value"),
            pa.array([r.batch_id for r in rows], type=pa.int64()),
            _timestamps([r.time_ms for r in rows]),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def batches(self, rows: Iterable, size: int) -> Iterator[pa.RecordBatch]:
        """`rows` in record batches of `size` rows (the last one smaller); none for no rows."""
        rows = iter(rows)
        while chunk := list(islice(rows, size)):
            yield self.batch(chunk)
