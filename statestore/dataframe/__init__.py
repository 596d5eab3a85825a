"""Live stores as Spark DataFrames: the `livestate` data source (docs/dataframe.md).

    from statestore.dataframe import register
    register(spark)
    df = spark.read.format("livestate").option("store", "sample").load()

Read straight from Cassandra while the stream writes, in parallel (one Spark input partition
per group of Cassandra partitions, or per token range of a global store), decoded with the
codecs the registry records; with `.option("pushdown", "true")` key and time filters narrow the
read to what the store's table can serve (statestore.dataframe.source says why on request). Named
`livestate`, not `statestore`: that short name is Spark's own state data source, which reads a
checkpoint offline. This wing sits beside statestore.stream and never imports it.
"""

from __future__ import annotations

from statestore.dataframe.source import PUSHDOWN_CONF, SHORT_NAME, LiveStateDataSource


def register(spark) -> None:
    """Make `spark.read.format("livestate")` read stores in this Spark session: registers the
    data source and turns on filter pushdown for Python data sources (PUSHDOWN_CONF), which
    Spark leaves off and without which it refuses a reader that pushes filters (a read asking
    for pushdown); a read that does not ask pushes nothing either way."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(LiveStateDataSource)


__all__ = ["PUSHDOWN_CONF", "SHORT_NAME", "LiveStateDataSource", "register"]
