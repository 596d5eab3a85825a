"""min and max of JSON numbers, as doubles; absent (None) until the key has a value."""

from __future__ import annotations

import math
import struct

from statestore.core.aggregation.kinds.base import NUMBER, Kind

_DOUBLE = struct.Struct(">d")


class _Extreme(Kind):
    takes = NUMBER
    idempotent = True
    pick = staticmethod(max)

    def identity(self) -> float | None:
        return None

    def partial_sql(self, column: str) -> str:
        return f"{self.name}({column})"

    def from_partial(self, value) -> float | None:
        return None if value is None else float(value)

    def merge(self, left: float | None, right: float | None) -> float | None:
        if left is None:
            return right
        if right is None:
            return left
        return self.pick(left, right)

    def problems(self, result: float | None) -> list[str]:
        return [] if result is None or math.isfinite(result) else [f"{self.name} {result} is not finite"]

    def _encode(self, accumulator: float | None) -> bytes:
        return b"" if accumulator is None else _DOUBLE.pack(accumulator)

    def _decode(self, data: bytes) -> float | None:
        return None if not data else _DOUBLE.unpack(data)[0]


class Max(_Extreme):
    name = "max"
    pick = staticmethod(max)


class Min(_Extreme):
    name = "min"
    pick = staticmethod(min)
