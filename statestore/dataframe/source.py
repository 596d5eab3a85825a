"""The `livestate` data source: a live store read as a Spark DataFrame, in parallel, straight
from Cassandra (pyspark's Python Data Source API, Spark 4).

Spark runs the pieces in different processes, which is what shapes this module:

- `LiveStateDataSource.schema()` runs once per `load()` in a Python worker on the driver: it
  resolves the options, looks the store up in the registry and answers the store's schema
  (statestore.dataframe.columns). The data source object is then pickled with what it found.
- The reader's `pushFilters()` and `partitions()` run in another worker on the driver; pushed
  filters (statestore.dataframe.pushdown) narrow the read, and `partitions()` asks the store's
  table for its splits (statestore.store.tables.splits: token ranges of a global table, groups
  of Cassandra partitions of a partitioned one), one Spark input partition each. The read
  function was pickled before `partitions()` ran, so all a read needs travels in its input
  partition, times judged on the driver included (the retention of window and session stores).
- `read()` runs on the executors, one task per input partition: it connects once per Python
  worker (statestore.conn.cassandra.session_for), reads its split through the table module,
  which owns every CQL statement, and hands Spark Arrow record batches.

Spark 4.1 plans a DataFrame's read once and keeps that plan (partitions and read function) on
the relation `load()` made, for every later query of the DataFrame. Filter pushdown replaces the
kept plan with the one planned for its query's filters, and a later query of the same DataFrame
that pushes no filter (a plain `count()` after a filtered `show()`) runs that narrowed plan: it
would miss rows. So pushdown is off unless a read asks for it (`.option("pushdown", "true")`),
for DataFrames that are loaded per query. Without it every filter is Spark's, the results are
the same, only the whole store is read. A kept plan also keeps its window and session segments
and its retention cut: `load()` again to see segments begun since. It keeps the store's table
too: once a re-layout (or a reset into a new table generation) moved the store, planning and
every task refuse to read the table the DataFrame was loaded with (check_not_moved: one registry
read each), and the error says to `load()` again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass, replace

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from statestore.conn.cassandra import session_for
from statestore.core.codecs import millis_of
from statestore.core.config import CassandraConfig
from statestore.core.errors import OptionError, StoreMismatchError
from statestore.core.model import OPEN_END, StoreSpec
from statestore.core.retention import unexpired
from statestore.dataframe.columns import BatchBuilder, schema_for
from statestore.dataframe.options import ReadOptions, cassandra_config, read_options
from statestore.dataframe.pushdown import Bounds, push
from statestore.store.book import registry
from statestore.store.retention import ReadHorizon
from statestore.store.tables import session_table_for, table_for, window_table_for
from statestore.store.tables.splits import Split

SHORT_NAME = "livestate"
# Spark refuses a Python reader with pushFilters unless this is on (register() turns it on).
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
_LAST_MS = OPEN_END - 1


@dataclass(frozen=True)
class ReadPlan:
    """What every split of one read is read with: versions (versioned stores), the bounds of
    the store's time column (window start, session end; retention applied), rows per page, and
    the retention cut of a key-value or versioned store's values (entries dated before it are
    absent, statestore.core.retention; None: nothing hidden)."""

    as_of: int | None = None
    every_version: bool = False
    time_from: int = 0
    time_to: int = _LAST_MS
    page_size: int = 5000
    cutoff: int | None = None


class SplitPartition(InputPartition):
    """One Spark input partition: a split of the store's table and how to read it."""

    def __init__(self, split: Split, plan: ReadPlan) -> None:
        super().__init__(split)
        self.split = split
        self.plan = plan


def table_of(spec: StoreSpec):
    """The table module of a store of any type (no I/O)."""
    if spec.store_type.windowed:
        return window_table_for(spec)
    if spec.store_type.sessioned:
        return session_table_for(spec)
    return table_for(spec)


def read_rows(table, session, spec: StoreSpec, split: Split, plan: ReadPlan) -> Iterator:
    """The stored rows of `split`, as its store type's table reads them, less those past the
    store's retention."""
    if spec.store_type.timed:
        return table.read_split(session, split, plan.time_from, plan.time_to, plan.page_size)
    if spec.store_type.versioned:
        rows = table.read_split(session, split, plan.as_of, plan.every_version, plan.page_size)
    else:
        rows = table.read_split(session, split, plan.page_size)
    return unexpired(rows, plan.cutoff)


class StoreReader(DataSourceReader):
    """Reads one store: its splits, then each split's rows as Arrow batches (no filter pushdown:
    Spark checks every filter on the rows read)."""

    def __init__(self, config: CassandraConfig, spec: StoreSpec, request: ReadOptions) -> None:
        self.config = config
        self.spec = spec
        self.request = request
        self.bounds = Bounds()

    def partitions(self) -> list[InputPartition]:
        if self.bounds.empty:
            return []
        session = session_for(self.config)
        check_not_moved(session, self.spec)
        table = table_of(self.spec)
        request, bounds = self.request, self.bounds
        plan = ReadPlan(request.as_of, request.every_version, page_size=request.page_size)
        if not self.spec.store_type.timed and request.as_of is None and not request.every_version:
            # current values, as the library's reads: retention at the stream time now
            plan = replace(plan, cutoff=ReadHorizon(session, self.spec).cutoff())
        keys = bounds.wanted_keys()
        if self.spec.store_type.timed:
            plan = self._timed_plan(session, plan)
            if plan.time_from > plan.time_to:
                return []
            first, last = table.segment_span(plan.time_from, plan.time_to)
            segments = [s for s in table.segments(session) if first <= s <= last]
            splits = table.splits(request.splits, segments, bounds.key_range, keys)
        else:
            splits = table.splits(request.splits, bounds.key_range, keys)
        return [SplitPartition(split, plan) for split in splits]

    def _timed_plan(self, session, plan: ReadPlan) -> ReadPlan:
        """`plan` with the time bounds of a window or session store: the pushed ones, and its
        retention at the store's stream time now (a window or session is never returned once
        it started or ended `retention` or more before it, as in every reader of the store)."""
        low = 0 if self.bounds.time_from is None else max(0, self.bounds.time_from)
        high = _LAST_MS if self.bounds.time_to is None else self.bounds.time_to
        moment = registry.progress(session, self.spec.keyspace, self.spec.name).max_event_time
        if moment is not None:
            low = max(low, millis_of(moment) - self.spec.windowing.retention_ms + 1)
        return replace(plan, time_from=low, time_to=high)

    def read(self, partition: SplitPartition | None) -> Iterator:
        if partition is None:  # Spark's stand-in when there is nothing to read
            return iter(())
        session = session_for(self.config)
        check_not_moved(session, self.spec)
        rows = read_rows(table_of(self.spec), session, self.spec, partition.split, partition.plan)
        return collector_paused(BatchBuilder(self.spec).batches(rows, partition.plan.page_size))


def moved_since_load(loaded: StoreSpec, now: StoreSpec) -> str | None:
    """Pure: why a DataFrame that found store `loaded` at load() cannot read it now that the
    registry says `now`, or None if it can: its read was planned for that table and its layout,
    and a re-layout (or a reset into a new table generation) moved the store to another one."""
    if (now.table, now.subpartitions) == (loaded.table, loaded.subpartitions):
        return None
    return (
        f"store '{loaded.name}' moved from table {loaded.table} to {now.table} ({now.subpartitions} sub-partition(s)) "
        "after this DataFrame was loaded (a re-layout, or a reset into a new table): its read was planned for the "
        "table the store no longer uses. load() it again to read the store as it is now"
    )


def check_not_moved(session, spec: StoreSpec) -> None:
    """StoreMismatchError (moved_since_load) when the registry no longer points store `spec` at
    the table the DataFrame was loaded with: one read of the registry's row, per planning on the
    driver and per task on the executors."""
    problem = moved_since_load(spec, registry.lookup(session, spec.keyspace, spec.name))
    if problem:
        raise StoreMismatchError(problem)


def collector_paused(batches: Iterator) -> Iterator:
    """`batches`, with Python's cyclic garbage collector off while they are made (as it was
    after). A read allocates a few objects per row and frees them with the page, in no cycle,
    but each allocation counts towards a collection, and collections that walk the pages still
    held cost a read of a million rows as much as the rest of it (measured: 56k rows/s with
    the collector, 160k without, one worker). A Python worker runs one task at a time."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield from batches
    finally:
        if was_on:
            gc.enable()


class PushdownReader(StoreReader):
    """StoreReader with filter pushdown (statestore.dataframe.pushdown), for `.option("pushdown",
    "true")`: see the module doc for why that is not the default."""

    def pushFilters(self, filters):  # pyspark's name
        self.bounds, rest = push(self.spec, filters)
        return rest


class LiveStateDataSource(DataSource):
    """`spark.read.format("livestate").option("store", NAME).load()` (see statestore.dataframe)."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        return schema_for(self._resolved()[1])

    def reader(self, schema: StructType) -> DataSourceReader:
        config, spec, request = self._resolved()
        expected = schema_for(spec)
        if schema.simpleString() != expected.simpleString():
            raise OptionError(
                f"the livestate data source reads store '{spec.name}' with its own schema, {expected.simpleString()}: "
                "leave .schema(...) out"
            )
        return (PushdownReader if request.pushdown else StoreReader)(config, spec, request)

    def _resolved(self) -> tuple[CassandraConfig, StoreSpec, ReadOptions]:
        """The settings, the store as registered and the read options; looked up once (in
        `schema()`, whose results travel with this object to `reader()`)."""
        found = getattr(self, "_found", None)
        if found is None:
            request = read_options(self.options)
            config = cassandra_config(self.options)
            spec = registry.lookup(session_for(config), config.keyspace, request.store)
            if (request.as_of is not None or request.every_version) and not spec.store_type.versioned:
                raise OptionError(
                    f"store '{spec.name}' is {spec.store_type.value}: asOf and versions are for versioned stores"
                )
            found = self._found = (config, spec, request)
        return found
