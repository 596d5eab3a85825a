"""Keyed aggregations: what a store keeps per key besides the word count's long.

Each aggregation is one small definition (statestore.core.aggregation.kinds): its identity, how
Spark computes a batch's partial accumulator, how two accumulators merge, how the stored bytes
look (a version byte first) and what its finished result is. A store holds the accumulators
(never the results) of the measures its spec names (statestore.core.aggregation.spec), side by
side in the entry's value, and the stream merges a batch's partials into them under the same
replay-safe rule as the word count's deltas (statestore.core.aggregation.plan).
"""

from statestore.core.aggregation.kinds import KINDS, Kind
from statestore.core.aggregation.plan import AggregateDelta, plan_aggregates
from statestore.core.aggregation.spec import AGGREGATE_FORMAT_PREFIX, AggregateCodec, AggregateSpec, Measure

__all__ = [
    "AGGREGATE_FORMAT_PREFIX",
    "KINDS",
    "AggregateCodec",
    "AggregateDelta",
    "AggregateSpec",
    "Kind",
    "Measure",
    "plan_aggregates",
]
