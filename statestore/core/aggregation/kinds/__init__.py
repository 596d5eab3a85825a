"""The aggregations, one module each; adding one is a module and a line here."""

from statestore.core.aggregation.kinds.base import ANY_VALUE, INTEGER, NO_FIELD, NUMBER, Kind
from statestore.core.aggregation.kinds.count import Count
from statestore.core.aggregation.kinds.distinct import Distinct
from statestore.core.aggregation.kinds.extremes import Max, Min
from statestore.core.aggregation.kinds.latest import Latest
from statestore.core.aggregation.kinds.sums import Sum, SumInt

KINDS: dict[str, Kind] = {kind.name: kind for kind in (Count(), Sum(), SumInt(), Min(), Max(), Latest(), Distinct())}

__all__ = ["ANY_VALUE", "INTEGER", "KINDS", "NO_FIELD", "NUMBER", "Kind"]
