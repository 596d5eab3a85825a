"""Brute-force partials for the law tests: what Spark's partial_sql computes, in plain Python."""

from __future__ import annotations

from decimal import Decimal

from statestore.core.aggregation.kinds.distinct import LG_K
from statestore.core.aggregation.kinds.latest import LatestValue


def partial_of(kind_name: str, records: list[tuple]):
    """The partial Spark gives for `records` of one key: (time_ms, partition, offset, value)."""
    values = [r[3] for r in records]
    if kind_name == "count":
        return len(records)
    if kind_name == "sum":
        return sum(float(v) for v in values) if values else None
    if kind_name == "sum_int":
        return Decimal(sum(values)) if values else None
    if kind_name == "min":
        return min(values, default=None)
    if kind_name == "max":
        return max(values, default=None)
    if kind_name == "latest":
        return max(((t, p, o, str(v)) for t, p, o, v in records), default=None)
    if kind_name == "distinct":
        if not values:
            return None
        import datasketches as ds

        sketch = ds.hll_sketch(LG_K, ds.tgt_hll_type.HLL_8)
        for v in values:
            sketch.update(str(v))
        return sketch.serialize_compact()
    raise KeyError(kind_name)


def truth_of(kind_name: str, records: list[tuple]):
    """The finished result over all `records` at once."""
    values = [r[3] for r in records]
    if kind_name == "count":
        return len(records)
    if kind_name in ("sum", "sum_int"):
        return sum(values)
    if kind_name == "min":
        return min(values, default=None)
    if kind_name == "max":
        return max(values, default=None)
    if kind_name == "latest":
        best = max(((t, p, o, v) for t, p, o, v in records), default=None)
        return None if best is None else best[3]
    if kind_name == "distinct":
        return len({str(v) for v in values})
    raise KeyError(kind_name)


__all__ = ["LatestValue", "partial_of", "truth_of"]
