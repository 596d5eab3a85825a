"""distinct: an approximate count of the field's distinct values, as an Apache DataSketches HLL
sketch (lg_k 12, about 1.6 % relative error), whose bytes Spark's `hll_sketch_agg`, the Java
DataSketches (Druid, Pinot) and the `datasketches` Python package all read. Merging is a union:
register-wise max, so merging a sketch into itself changes nothing."""

from __future__ import annotations

from statestore.core.aggregation.kinds.base import ANY_VALUE, Kind

LG_K = 12


def _sketches():
    import datasketches  # only stores with a distinct measure need it

    return datasketches


class Distinct(Kind):
    name = "distinct"
    takes = ANY_VALUE
    idempotent = True

    def identity(self) -> bytes | None:
        return None

    def partial_sql(self, column: str) -> str:
        return f"hll_sketch_agg({column}, {LG_K})"

    def from_partial(self, value) -> bytes | None:
        return None if value is None else bytes(value)

    def merge(self, left: bytes | None, right: bytes | None) -> bytes | None:
        if left is None:
            return right
        if right is None:
            return left
        ds = _sketches()
        union = ds.hll_union(LG_K)
        union.update(ds.hll_sketch.deserialize(left))
        union.update(ds.hll_sketch.deserialize(right))
        return union.get_result(ds.tgt_hll_type.HLL_8).serialize_compact()

    def finish(self, accumulator: bytes | None) -> float:
        """The estimate, to two decimals: a sketch's estimate is no more precise than that
        (the exact counting of its first values comes out as 2.000000004967054)."""
        if accumulator is None:
            return 0.0
        return round(_sketches().hll_sketch.deserialize(accumulator).get_estimate(), 2)

    def problems(self, result: float) -> list[str]:
        return [] if result >= 0 else [f"distinct estimate {result} is negative"]

    def _encode(self, accumulator: bytes | None) -> bytes:
        return b"" if accumulator is None else accumulator

    def _decode(self, data: bytes) -> bytes | None:
        if not data:
            return None
        _sketches().hll_sketch.deserialize(data)  # refuses bytes that are no sketch
        return data
