"""count: how many records of the key (all of them: a record that cannot be counted is a dead letter)."""

from __future__ import annotations

import struct

from statestore.core.aggregation.kinds.base import NO_FIELD, Kind

_LONG = struct.Struct(">q")


class Count(Kind):
    name = "count"
    takes = NO_FIELD

    def identity(self) -> int:
        return 0

    def partial_sql(self, column: str) -> str:
        return "count(1)"

    def from_partial(self, value) -> int:
        return int(value or 0)

    def merge(self, left: int, right: int) -> int:
        return left + right

    def problems(self, result: int) -> list[str]:
        return [] if result >= 0 else [f"count {result} is negative"]

    def _encode(self, accumulator: int) -> bytes:
        return _LONG.pack(accumulator)

    def _decode(self, data: bytes) -> int:
        return _LONG.unpack(data)[0]
