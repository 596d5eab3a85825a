"""The aggregate stage: a batch's partial accumulators per key, and their replay-safe apply to
an aggregate store (a key-value store whose value holds its measures' accumulators).

Spark computes each key's partials with the measures' own aggregates (Kind.partial_sql over the
typed columns of statestore.stream.json_input), one row per key; the apply, on the executors or
on the driver for a small batch, reads the keys' entries, merges (plan_aggregates: a key
already written by this batch or a later one is skipped, so a replay completes exactly what
the first attempt did not reach) and writes them at the batch's write timestamp. The records
the input stage could not count come back as one row with a null key: their number is the
batch's `uncountable` (it then writes their dead letters).

A window store (partitioned-window) keeps the measures per key and window: each countable
record counts in every window of its event time (TIME_MS) still open at the stream time the
batch began with, decided as the word count's windows are (statestore.stream.windowed's
window_starts and open_starts, the Spark form of WindowSpec.starts_of and closed), so a replay
decides the same. A record with a closed window is late: counted in its open windows only (if
any), and a dead letter `late` (late_letter_rows), counted in the null key's row too. Its
partials rows carry the window's start last; their deltas are keyed by window_cache_key and
applied by apply_window_aggregates.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator

from pyspark.sql import functions as F

from statestore.conn.cassandra import session_for
from statestore.conn.retry import with_retries
from statestore.core.aggregation import AggregateDelta, AggregateSpec, plan_aggregates
from statestore.core.config import CassandraConfig
from statestore.core.model import Entry, StoreSpec, WindowedEntry
from statestore.core.windows import WindowSpec
from statestore.store.book import deadletters
from statestore.store.tables import table_for, window_table_for
from statestore.stream.apply import (
    ApplyStats,
    Timer,
    cached_task,
    collector_paused,
    run_applier,
    sliced,
    timed,
    write_all,
)
from statestore.stream.apply_cache import (
    BucketCache,
    CachePlan,
    bucket_expression,
    expiring_keys,
    remember_unless_expiring,
)
from statestore.stream.apply_windows import WindowRows, forget_closed_windows, window_cache_key, window_of
from statestore.stream.json_input import KEY, REASON, TIME_MS, JsonInput, measure_columns
from statestore.stream.plan import entry_of, record_of
from statestore.stream.windowed import NO_WINDOW, late_detail, open_starts, window_starts

RECORDS = "records"
BUCKET = "bucket"  # a partial's apply-cache bucket (apply.with_buckets' column)
WINDOW_START = "window_start"
_STARTS, _OPEN = "_starts", "_open"


def partials(parsed, spec: JsonInput, buckets: int | None = None):
    """(key, records, time_ms, m0, m1, ...[, bucket]) per key of the batch's countable records:
    how many, their latest event time and each measure's partial accumulator (a DataFrame plan).
    The records with a reason are grouped under a null key, counted in `records`. `buckets`:
    the apply cache's (None: off), each row's bucket last (Spark's hash partitioning of the key,
    as the grouping shuffles it: apply_cache.bucket_expression)."""
    keyed = parsed.withColumn(KEY, F.when(F.col(REASON).isNull(), F.col(KEY)))
    grouped = keyed.groupBy(KEY).agg(*_aggregations(spec))
    if buckets is None:
        return grouped
    return grouped.withColumn(BUCKET, F.expr(bucket_expression(buckets, (KEY,))))


def _aggregations(spec: JsonInput) -> list:
    """Per group: its records, their latest event time, each measure's partial accumulator."""
    columns = measure_columns(spec.aggregate)
    measures = [
        F.expr(m.aggregation.partial_sql(columns[m.name])).alias(f"m{i}") for i, m in enumerate(spec.aggregate.measures)
    ]
    return [F.count(F.lit(1)).alias(RECORDS), F.max(TIME_MS).alias(TIME_MS), *measures]


def _with_windows(parsed, windowing: WindowSpec, stream_time_ms: int | None):
    """The parsed records with every window of their event time (_STARTS) and the open ones
    (_OPEN) at `stream_time_ms` (None: all are open)."""
    starts = window_starts(F.col(TIME_MS), windowing)
    return parsed.select("*", starts.alias(_STARTS), open_starts(starts, windowing, stream_time_ms).alias(_OPEN))


def _late():
    """A countable record with a closed window, or with no window at all (an event time before
    1970, which no window holds: a dead letter, never counted nowhere without a word)."""
    return F.col(REASON).isNull() & ((F.size(_OPEN) < F.size(_STARTS)) | (F.size(_STARTS) == 0))


def window_partials(
    parsed, spec: JsonInput, windowing: WindowSpec, stream_time_ms: int | None, buckets: int | None = None
):
    """(key, records, time_ms, m0, m1, ..., window_start[, bucket]) per key and open window of
    the batch's countable records (a DataFrame plan). The records with a reason and the late
    ones (a closed window: late_letter_rows) are counted in one row of a null key and window
    NO_WINDOW; a late record counts in its open windows too. `buckets`: the apply cache's
    (None: off), each row's bucket last: Spark's hash partitioning of (key, window start), as
    the grouping shuffles it."""
    windowed = _with_windows(parsed, windowing, stream_time_ms)
    nowhere = F.array(F.lit(NO_WINDOW).cast("bigint"))
    slots = (
        F.when(F.col(REASON).isNotNull(), nowhere)
        .when(_late(), F.concat(F.col(_OPEN), nowhere))
        .otherwise(F.col(_OPEN))
    )
    exploded = windowed.select("*", F.explode(slots).alias(WINDOW_START))
    keyed = exploded.withColumn(KEY, F.when(F.col(WINDOW_START) != NO_WINDOW, F.col(KEY)))
    measures = [f"m{i}" for i in range(len(spec.aggregate.measures))]
    rows = (
        keyed.groupBy(KEY, WINDOW_START)
        .agg(*_aggregations(spec))
        .select(KEY, RECORDS, TIME_MS, *measures, WINDOW_START)
    )
    if buckets is None:
        return rows
    return rows.withColumn(BUCKET, F.expr(bucket_expression(buckets, (KEY, WINDOW_START))))


def late_letter_rows(parsed, windowing: WindowSpec, stream_time_ms: int | None):
    """The batch's late records as dead-letter rows (json_input.dead_letter_rows' columns),
    judged by their event time (TIME_MS), with the word count's detail and the event time."""
    columns = ("topic", "partition", "offset", "ts_ms", REASON, "detail", "raw")
    late = _with_windows(parsed, windowing, stream_time_ms).filter(_late())
    closed = (
        F.lit(None)
        if stream_time_ms is None
        else late_detail(F.col(_STARTS), F.col(_OPEN), windowing, stream_time_ms, "the record was")
    )
    detail = F.when(
        F.size(_STARTS) == 0, F.format_string("its event time %d ms is before 1970: no window holds it", F.col(TIME_MS))
    ).otherwise(F.concat(closed, F.format_string(" (its event time %d ms)", F.col(TIME_MS))))
    return late.select(*columns[:4], F.lit(deadletters.LATE).alias(REASON), detail.alias("detail"), "raw")


def delta_of(row: tuple, aggregate: AggregateSpec) -> AggregateDelta:
    """Pure: one partials row (key, records, time_ms, m0, ...) as an AggregateDelta. Arrow gives
    a struct (latest's partial) as a dict of its fields: the kind takes them in order."""
    accumulators = tuple(
        m.aggregation.from_partial(tuple(value.values()) if isinstance(value, dict) else value)
        for m, value in zip(aggregate.measures, row[3:], strict=True)
    )
    return AggregateDelta(row[0].encode("utf-8"), accumulators, row[2], int(row[1]))


def window_delta_of(row: tuple, aggregate: AggregateSpec) -> AggregateDelta:
    """Pure: one window partials row (key, records, time_ms, m0, ..., window_start) as an
    AggregateDelta keyed by window_cache_key."""
    delta = delta_of(row[:-1], aggregate)
    return delta._replace(key=window_cache_key(delta.key, int(row[-1])))


def bucketed_delta_of(row: tuple, aggregate: AggregateSpec) -> AggregateDelta:
    """Pure: one partials row with its apply-cache bucket last (partials with `buckets`)."""
    return delta_of(row[:-1], aggregate)._replace(bucket=int(row[-1]))


def bucketed_window_delta_of(row: tuple, aggregate: AggregateSpec) -> AggregateDelta:
    """Pure: one window partials row with its apply-cache bucket last (window_partials with `buckets`)."""
    return window_delta_of(row[:-1], aggregate)._replace(bucket=int(row[-1]))


def slices_of(
    rows: Iterable[tuple], aggregate: AggregateSpec, windowed: bool = False, bucketed: bool = False
) -> Iterator[list[AggregateDelta]]:
    """A task's partials rows (`windowed`: window_partials' rows; `bucketed`: with their
    bucket last) as slices of deltas (apply.sliced)."""
    of = {
        (False, False): delta_of,
        (False, True): bucketed_delta_of,
        (True, False): window_delta_of,
        (True, True): bucketed_window_delta_of,
    }[(windowed, bucketed)]
    return sliced(of(row, aggregate) for row in rows)


def apply_aggregates(
    session,
    spec: StoreSpec,
    aggregate: AggregateSpec,
    batch_id: int,
    deltas: list[AggregateDelta],
    concurrency: int,
    write_ts: int,
    timer: Timer | None = None,
    cutoff_ms: int | None = None,
    *,
    cache: BucketCache | None = None,
    table=None,
) -> ApplyStats:
    """Read the entries of the deltas' keys, merge the partials in (plan_aggregates), write the
    merged entries at `write_ts`. `words`: the records counted. With `cache` (the keys' bucket
    file: statestore.stream.apply_cache, the same trust rules as the word count's) only the
    keys it cannot vouch for are read, and every key's entry as the store now holds it is kept
    in it (its accumulators whole: plan.record_of), but for a key read carrying a TTL
    (remember_unless_expiring). `table`: the entries' I/O (None: the store's table, noting TTLs
    with `cache`)."""
    if not deltas:
        return ApplyStats()
    if table is None:
        table = table_for(spec) if cache is None else table_for(spec).noting_ttl()
    keys = [d.key for d in deltas]
    expiring: Collection[bytes] = ()
    if cache is None:
        current = timed(timer, "read", lambda: table.read_entries(session, keys, concurrency))
        read = len(keys)
    else:
        current, to_read = _vouched(cache, keys, timer)
        read = len(to_read)
        if to_read:
            found = timed(timer, "read", lambda: table.read_entries(session, [keys[i] for i in to_read], concurrency))
            expiring = expiring_keys(found)
            current.update(found)
    writes, skipped = timed(timer, "plan", lambda: plan_aggregates(aggregate, current, deltas, batch_id, cutoff_ms))
    write_all(batch_id, lambda rows: table.write_entries(session, rows, concurrency, write_ts), writes, timer)
    if cache is not None:
        _remember(cache, current, writes, expiring, timer)
    return _stats(deltas, len(writes), skipped, read)


def _stats(deltas: list[AggregateDelta], written: int, skipped: int, read: int) -> ApplyStats:
    """A slice's figures: `words` are the records counted, the time the latest counted."""
    times = [d.time_ms for d in deltas if d.time_ms is not None]
    return ApplyStats(
        len(deltas), written, skipped, max(times) if times else None, read=read, words=sum(d.records for d in deltas)
    )


def apply_window_aggregates(
    session,
    spec: StoreSpec,
    aggregate: AggregateSpec,
    batch_id: int,
    deltas: list[AggregateDelta],
    concurrency: int,
    write_ts: int,
    timer: Timer | None = None,
    table: WindowRows | None = None,
    *,
    stream_time_ms: int | None = None,
    cache: BucketCache | None = None,
) -> ApplyStats:
    """apply_aggregates for a window store: the deltas are keyed by window_cache_key (one per
    key and open window of the batch's records), the window rows read, merged
    (plan_aggregates, the same replay-safe rule per window) and written at `write_ts`.
    `stream_time_ms`: the store's stream time at the batch's start, after which no window of
    the stream's can hold a row, so none is read (apply_windows' rule, while the stream is the
    store's only writer: with the apply cache on; None: every window is read). `cache`: the
    keys' bucket file (window_cache_key's, start first), as apply_aggregates keeps it: a window
    it vouches for is not read. `table`: the rows' I/O (None: the store's table, noting TTLs
    with `cache`)."""
    if not deltas:
        return ApplyStats()
    if table is None:
        table = window_table_for(spec) if cache is None else window_table_for(spec).noting_ttl()
    keys = [d.key for d in deltas]
    current: dict[bytes, Entry] = {}
    if cache is None:
        unknown: Iterable[int] = range(len(keys))
    else:
        current, unknown = _vouched(cache, keys, timer)
    windows = [window_of(keys[i]) for i in unknown]
    to_read = [w for w in windows if stream_time_ms is None or w[1] <= stream_time_ms]
    expiring: Collection[bytes] = ()
    if to_read:
        found = timed(timer, "read", lambda: table.read(session, to_read, concurrency))
        expiring = {window_cache_key(key, start) for key, start in expiring_keys(found)}
        current.update(
            (window_cache_key(key, start), Entry(window_cache_key(key, start), e.value, e.batch_id, e.time_ms))
            for (key, start), e in found.items()
        )
    writes, skipped = timed(timer, "plan", lambda: plan_aggregates(aggregate, current, deltas, batch_id))
    rows = [WindowedEntry(*window_of(e.key), e.value, e.batch_id, e.time_ms) for e in writes]
    write_all(batch_id, lambda batch: table.write(session, batch, concurrency, write_ts), rows, timer)
    if cache is not None:
        _remember(cache, current, writes, expiring, timer)
    return _stats(deltas, len(writes), skipped, len(to_read))


def _vouched(cache: BucketCache, keys: list[bytes], timer) -> tuple[dict[bytes, Entry], list[int]]:
    """The entries `cache` vouches for among `keys` (its records, whole), and the positions of
    the keys it cannot vouch for, to be read."""
    records, unknown = timed(timer, "cache", lambda: cache.lookup(keys))
    return {keys[i]: entry_of(keys[i], record) for i, record in enumerate(records) if record is not None}, unknown


def _remember(
    cache: BucketCache, current: dict[bytes, Entry], writes: list[Entry], expiring: Collection[bytes], timer
) -> None:
    """Keep every key's entry as the store now holds it in `cache` (its accumulators whole:
    plan.record_of), but for a key read carrying a TTL (remember_unless_expiring)."""
    held = {key: record_of(entry) for key, entry in current.items()}
    held.update((entry.key, record_of(entry)) for entry in writes)
    timed(timer, "cache", lambda: remember_unless_expiring(cache, list(held.items()), expiring))


def aggregate_applier(
    config: CassandraConfig,
    spec: StoreSpec,
    aggregate: AggregateSpec,
    batch_id: int,
    write_ts: int,
    timer: Timer | None = None,
    cutoff_ms: int | None = None,
    cache: CachePlan | None = None,
    stream_time_ms: int | None = None,
):
    """A function over one task's partials rows (without the null key's): applies them slice by
    slice and yields the task's ApplyStats. Transient Cassandra errors are retried within the
    retry budget: repeating a slice is safe (the module doc). A window store's rows are
    window_partials' rows, applied by apply_window_aggregates (no closed window is written, so
    `cutoff_ms`, the key-value retention, does not apply; `stream_time_ms`: the store's stream
    time, after which no window is read, with the apply cache on). `cache`: the batch's
    apply-cache plan (rows then carry their bucket): each slice goes with its bucket's file
    (apply.cached_task), whose token the task's stats report; a window store's file opened
    forgets the windows closed at `stream_time_ms`, as the word count's does."""
    windowed = spec.windowing is not None

    def apply(session, deltas: list[AggregateDelta], file: BucketCache | None) -> ApplyStats:
        concurrency = config.write_concurrency
        if windowed:
            return apply_window_aggregates(
                session,
                spec,
                aggregate,
                batch_id,
                deltas,
                concurrency,
                write_ts,
                timer,
                stream_time_ms=stream_time_ms,
                cache=file,
            )
        return apply_aggregates(
            session, spec, aggregate, batch_id, deltas, concurrency, write_ts, timer, cutoff_ms, cache=file
        )

    def apply_slice(deltas: list[AggregateDelta], file: BucketCache | None = None) -> ApplyStats:
        return with_retries(
            config, f"applying batch {batch_id} to store {spec.name}", lambda: apply(session_for(config), deltas, file)
        )

    def apply_partition(rows: Iterator[tuple]) -> Iterator[ApplyStats]:
        slices = slices_of(rows, aggregate, windowed, bucketed=cache is not None)
        if cache is None:
            yield timed(timer, "task", lambda: sum((apply_slice(d) for d in slices), ApplyStats()))
        else:
            on_open = forget_closed_windows(spec, stream_time_ms) if windowed else None
            yield timed(timer, "task", lambda: cached_task(slices, cache, apply_slice, on_open))

    return apply_partition


def applied(batches: Iterable, applier: Callable[[Iterator], Iterator[ApplyStats]]) -> Iterator[ApplyStats]:
    """`applier` over Arrow record batches of partials: its stats, then the null key's records
    (the batch's dead letters) as `uncountable`, in stats of their own."""
    uncountable = 0

    def rows():
        nonlocal uncountable
        for batch in batches:
            for row in zip(*(column.to_pylist() for column in batch.columns), strict=True):
                if row[0] is None:
                    uncountable += row[1]
                else:
                    yield row

    with collector_paused():
        yield from applier(rows())
    if uncountable:
        yield ApplyStats(uncountable=uncountable)


def run_on_executors(partials_df, applier: Callable[[Iterator], Iterator[ApplyStats]]) -> ApplyStats:
    """Run `applier` on the executors over the partials (crossing as Arrow: the word count's
    run_applier, fed by this stage's `applied`); the stats of every task, summed."""
    return run_applier(partials_df, applier, feed=applied)


def run_on_driver(partials, applier: Callable[[Iterator], Iterator[ApplyStats]]) -> ApplyStats:
    """`applier` run by the driver itself over a small batch's partials (a pyarrow Table): no
    Python worker starts (statestore.stream.apply's apply_on_driver, without the cache)."""
    return sum(applied(partials.to_batches(), applier), ApplyStats())
