"""Byte formats of keys and values, chosen so other tools can read the tables.

The word count's keys are UTF-8 text; its values are 8-byte big-endian signed longs, the
format of Kafka's LongSerializer / LongDeserializer. Stores built with the library choose
their own codecs (string, long, int, bytes, json, or any object with name/encode/decode).
"""

from __future__ import annotations

import calendar
import json
import struct
from dataclasses import dataclass
from typing import Any, Protocol

from statestore.core.errors import CodecError, StoredDataError

_LONG = struct.Struct(">q")
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1


def encode_long(value: int) -> bytes:
    if not LONG_MIN <= value <= LONG_MAX:
        raise CodecError(f"{value} does not fit a signed 64-bit long")
    return _LONG.pack(value)


def decode_long(data: bytes) -> int:
    if len(data) != 8:
        raise CodecError(f"a long value is 8 bytes, got {len(data)}: {bytes(data[:16]).hex()}")
    return _LONG.unpack(data)[0]


def encode_text(text: str) -> bytes:
    return text.encode("utf-8")


def decode_text(data: bytes) -> str:
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CodecError(f"key is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None


class Codec(Protocol):
    """Turns values into the bytes stored in a key or value column, and back.

    `name` is recorded in the store registry, so readers (CLI, HTTP API) decode with the same
    codec the writer used. Key order in scans is the byte order of the encoded keys.
    """

    name: str

    def encode(self, value: Any) -> bytes: ...

    def decode(self, data: bytes) -> Any: ...


@dataclass(frozen=True)
class _StringCodec:
    name: str = "string"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, str):
            raise CodecError(f"the string codec takes str, got {type(value).__name__}")
        return encode_text(value)

    def decode(self, data: bytes) -> str:
        return decode_text(data)


@dataclass(frozen=True)
class _IntegerCodec:
    """Big-endian signed integers: `long` is Kafka's LongSerializer, `int` its IntegerSerializer."""

    name: str
    width: int

    def encode(self, value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, int):
            raise CodecError(f"the {self.name} codec takes int, got {type(value).__name__}")
        try:
            return value.to_bytes(self.width, "big", signed=True)
        except OverflowError:
            raise CodecError(f"{value} does not fit a signed {self.width * 8}-bit {self.name}") from None

    def decode(self, data: bytes) -> int:
        if len(data) != self.width:
            raise CodecError(f"a {self.name} value is {self.width} bytes, got {len(data)}: {bytes(data[:16]).hex()}")
        return int.from_bytes(data, "big", signed=True)


@dataclass(frozen=True)
class _BytesCodec:
    name: str = "bytes"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise CodecError(f"the bytes codec takes bytes, got {type(value).__name__}")
        return bytes(value)

    def decode(self, data: bytes) -> bytes:
        return bytes(data)


@dataclass(frozen=True)
class _JsonCodec:
    """Compact JSON in UTF-8 with sorted object keys, so equal values encode to equal bytes."""

    name: str = "json"

    def encode(self, value: Any) -> bytes:
        try:
            return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise CodecError(f"the json codec cannot encode {type(value).__name__}: {exc}") from None

    def decode(self, data: bytes) -> Any:
        try:
            return json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise CodecError(f"value is not valid UTF-8 JSON: {exc}") from None


STRING: Codec = _StringCodec()
LONG: Codec = _IntegerCodec("long", 8)
INT: Codec = _IntegerCodec("int", 4)
BYTES: Codec = _BytesCodec()
JSON: Codec = _JsonCodec()
BUILT_IN: dict[str, Codec] = {c.name: c for c in (STRING, LONG, INT, BYTES, JSON)}
# Names the first registry rows used for the word count's formats.
_ALIASES = {"utf8": "string", "long-be64": "long"}


def decode_stored(codec: Codec, data: bytes, store: str, part: str = "value") -> Any:
    """`codec.decode(data)` for a key or value (`part`) read from `store`: a failure there is
    the stored data's (written past this codec), so it is a StoredDataError, not a CodecError."""
    try:
        return codec.decode(data)
    except ValueError as exc:  # CodecError, and what a custom codec's parser raises
        raise StoredDataError(
            f"store '{store}' holds a {part} that its {codec.name} codec cannot decode ({exc}): something "
            f"wrote it without this codec; rewrite or delete that entry, or read with the codec it was written with"
        ) from exc


def canonical_name(name: str) -> str:
    """A codec name as recorded now (the first registry rows used other names)."""
    return _ALIASES.get(name, name)


def codec_named(name: str) -> Codec:
    """A built-in codec by its registry name, or an aggregate store's (its value format names
    its measures: statestore.core.aggregation.spec); a custom codec's name decodes as raw bytes."""
    from statestore.core.aggregation.spec import AGGREGATE_FORMAT_PREFIX, AggregateSpec

    if name.startswith(AGGREGATE_FORMAT_PREFIX):
        try:
            return AggregateSpec.parse(name[len(AGGREGATE_FORMAT_PREFIX) :]).codec
        except ValueError as exc:
            raise CodecError(f"value format {name!r} names no valid measures: {exc}") from None
    name = _ALIASES.get(name, name)
    codec = BUILT_IN.get(name)
    if codec is None:
        raise CodecError(f"unknown codec {name!r}: use one of {', '.join(BUILT_IN)} or pass a Codec object")
    return codec


def check_codec(codec: Any) -> Codec:
    """`codec` if it has what a Codec needs (a name, encode and decode), else a clear error."""
    if isinstance(codec, str):
        return codec_named(codec)
    name = getattr(codec, "name", None)
    if not (
        isinstance(name, str)
        and name
        and callable(getattr(codec, "encode", None))
        and callable(getattr(codec, "decode", None))
    ):
        raise CodecError(f"{codec!r} is not a codec: it needs a non-empty `name`, `encode(value)` and `decode(data)`")
    return codec


def millis_of(moment) -> int:
    """Milliseconds since the epoch of a naive-UTC datetime, as the driver returns them."""
    return calendar.timegm(moment.utctimetuple()) * 1000 + moment.microsecond // 1000
