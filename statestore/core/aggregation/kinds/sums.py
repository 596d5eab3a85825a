"""sum (floating point) and sum_int (exact integers, never overflowing)."""

from __future__ import annotations

import math
import struct
from decimal import Decimal

from statestore.core.aggregation.kinds.base import INTEGER, NUMBER, Kind

_DOUBLE = struct.Struct(">d")


class Sum(Kind):
    """IEEE double sum of any JSON numbers. A batch's partial is summed by Spark in an order of
    its choosing, so the result is the exact sum up to floating-point rounding (sum_int is exact)."""

    name = "sum"
    takes = NUMBER

    def identity(self) -> float:
        return 0.0

    def partial_sql(self, column: str) -> str:
        return f"sum({column})"

    def from_partial(self, value) -> float:
        return float(value or 0.0)

    def merge(self, left: float, right: float) -> float:
        return left + right

    def problems(self, result: float) -> list[str]:
        return [] if math.isfinite(result) else [f"sum {result} is not finite"]

    def _encode(self, accumulator: float) -> bytes:
        return _DOUBLE.pack(accumulator)

    def _decode(self, data: bytes) -> float:
        return _DOUBLE.unpack(data)[0]


class SumInt(Kind):
    """Exact sum of JSON integers that each fit a signed 64-bit long (a larger one is a dead
    letter `overflow`). The accumulator is an integer of any size: the sum itself never
    overflows. Stored as a big-endian two's-complement integer of as many bytes as it needs."""

    name = "sum_int"
    takes = INTEGER

    def identity(self) -> int:
        return 0

    def partial_sql(self, column: str) -> str:
        # Decimal(38, 0): a batch would need 10^19 records of the largest long to overflow it.
        return f"sum(CAST({column} AS DECIMAL(38, 0)))"

    def from_partial(self, value) -> int:
        if value is None:
            return 0
        if isinstance(value, Decimal) and value != value.to_integral_value():
            raise ValueError(f"sum_int's partial {value} is not an integer")
        return int(value)

    def merge(self, left: int, right: int) -> int:
        return left + right

    def _encode(self, accumulator: int) -> bytes:
        width = max(1, (accumulator.bit_length() + 8) // 8)
        return accumulator.to_bytes(width, "big", signed=True)

    def _decode(self, data: bytes) -> int:
        if not data:
            raise ValueError("no bytes")
        return int.from_bytes(data, "big", signed=True)
