"""Full-table scans split by token range, run in parallel as Spark tasks.

The ring is cut into contiguous token ranges; each Spark task reads its ranges with paged
queries straight from Cassandra (statestore.conn.cassandra.session_for on the executor, as the
stream's apply does) and returns only a small summary, so no table ever reaches the driver.
Rows come back in token order, so each partition's rows are contiguous within a range.

The statements are built from the table's schema (the driver's metadata) rather than from a
store type module: maintenance reads every layout alike, by partition key, clustering
columns and cells.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cassandra.cluster import EXEC_PROFILE_DEFAULT
from pyspark.sql import types as T

from statestore.conn.cassandra import prepare, session_for
from statestore.core.codecs import decode_long, millis_of
from statestore.core.errors import StoreNotFoundError
from statestore.core.model import StoreSpec
from statestore.present.progress import spark_progress
from statestore.store.tables.global_kv import token_splits
from statestore.store.tables.paging import paged

__all__ = ["TableShape", "default_ranges", "run_over_ranges", "scan_range", "shape_of", "token_splits"]


@dataclass(frozen=True)
class TableShape:
    """A store table's primary key and cells, with each column's CQL type."""

    keyspace: str
    table: str
    partition_key: tuple[str, ...]
    clustering: tuple[str, ...]
    cells: tuple[str, ...]
    types: tuple[tuple[str, str], ...]

    @property
    def qualified(self) -> str:
        return f"{self.keyspace}.{self.table}"

    def type_of(self, column: str) -> str:
        return dict(self.types)[column]

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self.partition_key + self.clustering

    def token(self) -> str:
        return f"token({', '.join(self.partition_key)})"

    def select_range(self, extra: tuple[str, ...] = ()) -> str:
        """Every row of one inclusive token range: token, key columns, cells, then `extra`."""
        columns = ", ".join((self.token(), *self.key_columns, *self.cells, *extra))
        return f"SELECT {columns} FROM {self.qualified} WHERE {self.token()} >= ? AND {self.token()} <= ?"

    def delete_row(self, timestamped: bool = True) -> str:
        """Delete one row by its primary key; with `timestamped`, USING TIMESTAMP ? first."""
        where = " AND ".join(f"{c} = ?" for c in self.key_columns)
        using = " USING TIMESTAMP ?" if timestamped else ""
        return f"DELETE FROM {self.qualified}{using} WHERE {where}"


def shape_of(session, spec: StoreSpec) -> TableShape:
    """The shape of `spec`'s table, from the driver's schema metadata."""
    keyspace = session.cluster.metadata.keyspaces.get(spec.keyspace)
    table = keyspace.tables.get(spec.table) if keyspace is not None else None
    if table is None:
        raise StoreNotFoundError(
            f"store '{spec.name}' is registered but its table {spec.keyspace}.{spec.table} does not exist: "
            "re-create it (StoreBuilder.create or the stream job) or unregister the store"
        )
    keys = {c.name for c in (*table.partition_key, *table.clustering_key)}
    return TableShape(
        spec.keyspace,
        spec.table,
        tuple(c.name for c in table.partition_key),
        tuple(c.name for c in table.clustering_key),
        tuple(name for name in table.columns if name not in keys),
        tuple((name, str(column.cql_type)) for name, column in table.columns.items()),
    )


def scan_range(session, shape: TableShape, token_range: tuple[int, int], page_size: int, extra=()) -> Iterator:
    """The rows of one token range, page by page (the next page is fetched while this one is used)."""
    select = prepare(session, shape.select_range(extra))
    select.is_idempotent = True
    return paged(session, select, token_range, page_size, EXEC_PROFILE_DEFAULT)


def default_ranges(spark) -> int:
    """Token ranges per store: two per core. Each Spark task has a fixed start-up cost, so a
    few large ranges beat many small ones; raise it for progress finer than a quarter of a store."""
    return max(2, 2 * spark.sparkContext.defaultParallelism)


def run_over_ranges(spark, work: list[tuple[int, tuple[int, int]]], task: Callable[[Iterator], Iterator], what: str):
    """Run `task` in one Spark task per item of `work`, (store index, token range), and collect
    what the tasks yield: one small summary each."""

    rdd = spark.sparkContext.parallelize(work, len(work))
    with spark_progress(spark, len(work), what):
        return rdd.mapPartitions(task).collect()


def _spark_type(cql_type: str, column: str):

    if column in ("key",):
        return T.StringType()
    if column == "value" or cql_type in ("bigint", "timestamp"):
        return T.LongType()
    if cql_type == "int":
        return T.IntegerType()
    return T.StringType()


def row_converter(shape: TableShape, raw_values: bool = False):
    """A function from a driver row (token first) to a Spark row of word-count values: key as
    UTF-8 text, value as a long (with `raw_values`: its bytes, as an aggregate store's),
    timestamps as epoch milliseconds (no time zone involved)."""

    columns = (*shape.key_columns, *shape.cells)
    kinds = [_spark_type(shape.type_of(c), c).typeName() for c in columns]

    def convert(row) -> tuple:
        out = []
        for column, kind, value in zip(columns, kinds, row[1:], strict=True):
            if value is None:
                out.append(None)
            elif column == "key":
                out.append(bytes(value).decode("utf-8", errors="replace"))
            elif column == "value":
                out.append(bytes(value) if raw_values else decode_long(value) if len(value) == 8 else None)
            elif hasattr(value, "utctimetuple"):
                out.append(millis_of(value))
            elif kind == "string":
                out.append(str(value))
            else:
                out.append(value)
        return tuple(out)

    return convert


def store_frame(spark, config, shape: TableShape, ranges: int, page_size: int = 5000, raw_values: bool = False):
    """The store's rows as a Spark DataFrame, read by executors over token ranges (the driver
    holds none of them): the table's columns, key as text and value as a long (with
    `raw_values`: as its bytes)."""

    columns = (*shape.key_columns, *shape.cells)
    schema = T.StructType(
        [
            T.StructField(c, T.BinaryType() if raw_values and c == "value" else _spark_type(shape.type_of(c), c), True)
            for c in columns
        ]
    )

    def read(items: Iterator[tuple[int, int]]) -> Iterator[tuple]:

        session = session_for(config)
        convert = row_converter(shape, raw_values)
        for token_range in items:
            yield from map(convert, scan_range(session, shape, token_range, page_size))

    splits = token_splits(ranges)
    return spark.createDataFrame(spark.sparkContext.parallelize(splits, len(splits)).mapPartitions(read), schema)
