"""Byte formats of keys and values, chosen so other tools can read the tables.

Keys are UTF-8 text; values are 8-byte big-endian signed longs, the format of Kafka's
LongSerializer / LongDeserializer.
"""

from __future__ import annotations

import calendar
import struct

from statestore.errors import CodecError

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


def millis_of(moment) -> int:
    """Milliseconds since the epoch of a naive-UTC datetime, as the driver returns them."""
    return calendar.timegm(moment.utctimetuple()) * 1000 + moment.microsecond // 1000
