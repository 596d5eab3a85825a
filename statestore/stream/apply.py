"""The replay-safe apply of one micro-batch's count deltas to a store.

Every entry remembers the batch that last wrote it (`batch_id`). Applying batch B:
  - an entry already written by batch B or later is skipped: B was applied before (a replay
    after a crash, a retried or speculative task) and adding again would double count;
  - any other entry gets the absolute value old + delta, written with batch_id = B.
Writes carry absolute values (never counter increments), so re-sending one is harmless.
A replay of B therefore completes exactly the entries the first attempt did not reach.
`advance` states the rule for one key; key-value stores apply it to a whole slice at once
(statestore.stream.plan, the same decisions computed as arrays).

This holds while (a) batch B has the same content each time it runs (Spark's offset log
guarantees it), (b) batches are applied in order by one writer per store, and (c) the batch
ids keep growing (statestore.stream.job checks the checkpoint against the registry).

Versioned stores get the same decisions on each key's current version. A batch makes the new
value a version valid from the batch's `version_ms` (its largest Kafka record timestamp,
the same on every executor and in every replay), splitting the current version; when
`version_ms` is not after the current version's start, the current version is rewritten in
place instead of creating a version in the past. A key's change (at most two rows of one
Cassandra partition) is one batch statement, so a replay sees it wholly written or not at all.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from itertools import pairwise
from typing import TypeVar

from statestore.conn.cassandra import session_for
from statestore.conn.retry import with_retries
from statestore.conn.spark import arrow_row, spare_zip_rereads
from statestore.core.codecs import decode_long, encode_long
from statestore.core.config import CassandraConfig
from statestore.core.model import Entry, StoreSpec, WindowedEntry
from statestore.store.tables import table_for
from statestore.store.tables.versioned_base import RowWrite, Version, plan_latest
from statestore.stream import faults
from statestore.stream.apply_cache import (
    BucketCache,
    CachePlan,
    bucket_expression,
    expiring_keys,
    remember_unless_expiring,
    sweep_stale,
)
from statestore.stream.plan import Delta, SlicePlan, plan_slice, plan_writes, stored_record

# A timing seam: called with a phase's name and its seconds. The job as shipped passes none
# (and then no clock is read); benchmarks pass one to see where an apply's time goes.
Timer = Callable[[str, float], None]


@dataclass(frozen=True)
class AccumulatorTimer:
    """A Timer for executors: adds each phase's seconds to the Spark accumulator of that name
    (phases without one are dropped). Picklable, so it travels with the apply's tasks."""

    accumulators: Mapping[str, object]

    def __call__(self, phase: str, seconds: float) -> None:
        accumulator = self.accumulators.get(phase)
        if accumulator is not None:
            accumulator.add(seconds)


def timed(timer: Timer | None, phase: str, step: Callable):
    """Run `step()`, reporting its duration to `timer` under `phase` (if there is a timer)."""
    if timer is None:
        return step()
    began = time.perf_counter()
    try:
        return step()
    finally:
        timer(phase, time.perf_counter() - began)


# The key under which a batch's deltas count what it cannot count (statestore.stream.job's
# batch_deltas with_uncountable): a word never holds a space, so no word is this key.
UNCOUNTABLE = " "


@dataclass(frozen=True)
class ApplyStats:
    keys: int = 0
    written: int = 0
    skipped: int = 0
    max_time_ms: int | None = None
    uncountable: int = 0  # messages and words the batch sends to the dead-letter table instead
    read: int = 0  # keys read from Cassandra (the others were vouched for by the apply cache)
    words: int = 0  # words counted (window stores: once per window, paned ones once per pane row, they count in)
    cache_tokens: tuple[tuple[int, str], ...] = ()  # (bucket, token) of each apply-cache file finished

    def __add__(self, other: ApplyStats) -> ApplyStats:
        times = [t for t in (self.max_time_ms, other.max_time_ms) if t is not None]
        return ApplyStats(
            self.keys + other.keys,
            self.written + other.written,
            self.skipped + other.skipped,
            max(times) if times else None,
            self.uncountable + other.uncountable,
            self.read + other.read,
            self.words + other.words,
            self.cache_tokens + other.cache_tokens,
        )

    @classmethod
    def of_slice(cls, deltas: list[Delta], written: int, skipped: int, read: int) -> ApplyStats:
        """A slice's figures: its keys, what it wrote and skipped, what it read, its words and
        its latest event time."""
        times = [d.time_ms for d in deltas if d.time_ms is not None]
        words = sum(d.amount for d in deltas)
        return cls(len(deltas), written, skipped, max(times) if times else None, read=read, words=words)


def advance(stored: Entry | WindowedEntry | None, delta: Delta, batch_id: int) -> tuple[bytes, int | None] | None:
    """Pure, the apply's one rule: the (value, event time) batch `batch_id` writes for `delta`
    over what is `stored` (None: nothing), or None when the stored entry already holds it."""
    if stored is not None and stored.batch_id is not None and stored.batch_id >= batch_id:
        return None
    base = decode_long(stored.value) if stored is not None else 0
    time_ms = delta.time_ms
    if stored is not None and stored.time_ms is not None and (time_ms is None or stored.time_ms > time_ms):
        time_ms = stored.time_ms
    return encode_long(base + delta.amount), time_ms


def plan_versions(
    current: dict[bytes, Version],
    deltas: Iterable[Delta],
    batch_id: int,
    version_ms: int | None,
    cutoff_ms: int | None = None,
) -> tuple[list[list[RowWrite]], int]:
    """Pure: the changes batch `batch_id` makes to a versioned store (one list of rows per
    key, see plan_latest), and how many keys it already wrote. A key whose current version
    is a tombstone, or dated before `cutoff_ms` (the store's retention), counts from 0 again."""
    live = {key: version.entry() for key, version in current.items() if not version.tombstone}
    writes, skipped = plan_writes(live, deltas, batch_id, cutoff_ms)
    changes = [plan_latest(current.get(w.key), w.key, w.value, version_ms, w.batch_id, w.time_ms) for w in writes]
    return changes, skipped


def apply_deltas(
    session,
    spec: StoreSpec,
    batch_id: int,
    deltas: list[Delta],
    concurrency: int,
    write_ts: int,
    version_ms: int | None = None,
    timer: Timer | None = None,
    cache: BucketCache | None = None,
    cutoff_ms: int | None = None,
) -> ApplyStats:
    """Read the current entries of the batch's keys, then write the new absolute values.
    Versioned stores: as versions valid from `version_ms` (None: rewrite current versions).
    Key-value stores with `cache` (the keys' bucket file) read only what it cannot vouch for,
    and keep what they read and wrote in it. An entry dated before `cutoff_ms` (the store's
    retention), read or cached, is taken as absent. `timer` hears the phases read, plan,
    write and cache."""
    if not deltas:
        return ApplyStats()
    table = table_for(spec)
    keys = [d.key for d in deltas]
    if cache is not None and not spec.store_type.versioned:
        table = table.noting_ttl()
        return _apply_cached(session, table, batch_id, deltas, keys, concurrency, write_ts, timer, cache, cutoff_ms)
    if spec.store_type.versioned:
        current = timed(timer, "read", lambda: table.read_latest(session, keys, concurrency))
        writes, skipped = timed(timer, "plan", lambda: plan_versions(current, deltas, batch_id, version_ms, cutoff_ms))
        write = table.write_rows
    else:
        current = timed(timer, "read", lambda: table.read_entries(session, keys, concurrency))
        writes, skipped = timed(timer, "plan", lambda: plan_writes(current, deltas, batch_id, cutoff_ms))
        write = table.write_entries
    write_all(batch_id, lambda rows: write(session, rows, concurrency, write_ts), writes, timer)
    return ApplyStats.of_slice(deltas, len(writes), skipped, read=len(keys))


def _apply_cached(
    session, table, batch_id, deltas, keys, concurrency, write_ts, timer, cache, cutoff_ms=None
) -> ApplyStats:
    """apply_deltas for a key-value store with its bucket's cache: read only the keys the
    cache cannot vouch for, plan on the records (statestore.stream.plan), write, and keep every
    key's record as the store now holds it, but for a key read carrying a TTL (`table` noting
    TTLs: remember_unless_expiring)."""
    stored, to_read = timed(timer, "cache", lambda: cache.lookup(keys))
    expiring = ()
    if to_read:
        read = timed(timer, "read", lambda: table.read_entries(session, [keys[i] for i in to_read], concurrency))
        expiring = expiring_keys(read)
        for i in to_read:
            entry = read.get(keys[i])
            stored[i] = None if entry is None else stored_record(entry)
    # The plan judges cached records by the retention too: the cache never brings back an expired entry.
    plan: SlicePlan = timed(timer, "plan", lambda: plan_slice(stored, deltas, batch_id, cutoff_ms))
    write_all(batch_id, lambda rows: table.write_entries(session, rows, concurrency, write_ts), plan.writes, timer)
    timed(timer, "cache", lambda: remember_unless_expiring(cache, plan.records, expiring))
    written = len(plan.writes)
    return ApplyStats(len(deltas), written, plan.skipped, plan.max_time_ms, read=len(to_read), words=plan.words)


def write_all(batch_id: int, write: Callable[[list], None], rows: list, timer: Timer | None) -> None:
    """Write a slice's rows (timed), after the fault switch's half-write when it is armed."""
    faults.crash_if_armed_mid_write(batch_id, lambda half: write(rows[:half]), len(rows))
    timed(timer, "write", lambda: write(rows))


# Deltas are applied in slices so a task's memory stays bounded whatever its input size.
SLICE = 20_000
T = TypeVar("T")


def sliced(items: Iterable[T]) -> Iterator[list[T]]:
    """`items` as slices of at most SLICE, then the rest: at least one slice, maybe empty, so
    every task reports its stats (each store kind's rows go through it)."""
    part: list[T] = []
    for item in items:
        part.append(item)
        if len(part) >= SLICE:
            yield part
            part = []
    yield part


def deltas_of(rows: Iterable) -> Iterator[list[Delta]]:
    """A task's rows of (word, delta, last_ms[, bucket]) as slices of Deltas (sliced)."""
    return sliced(Delta(row[0].encode("utf-8"), int(row[1]), row[2], row[3] if len(row) > 3 else None) for row in rows)


def partition_applier(
    config: CassandraConfig,
    spec: StoreSpec,
    batch_id: int,
    write_ts: int,
    version_ms: int | None = None,
    timer: Timer | None = None,
    cache: CachePlan | None = None,
    cutoff_ms: int | None = None,
):
    """A function over one task's rows of (word, delta, last_ms[, bucket]) (run by run_applier):
    it applies them on the executor and yields one ApplyStats per task. Transient Cassandra
    errors are retried within the retry budget: repeating a slice is safe (see the module doc).
    `version_ms`: where versioned stores' new versions start (computed once per batch on the
    driver). `cache`: the batch's apply-cache plan (rows then carry their bucket; see
    statestore.stream.apply_cache). `cutoff_ms`: entries dated before it are absent (the
    store's retention at the batch's stream time, statestore.core.retention; None: no
    retention). `timer` (an AccumulatorTimer: it runs on the executors)
    hears read, plan, write and cache per slice, `task` per task and `slices` (1 per slice)."""

    def apply_slice(deltas: list[Delta], bucket: BucketCache | None) -> ApplyStats:
        if timer is not None:
            timer("slices", 1)
        return with_retries(
            config,
            f"applying batch {batch_id} to store {spec.name}",
            lambda: apply_deltas(
                session_for(config),
                spec,
                batch_id,
                deltas,
                config.write_concurrency,
                write_ts,
                version_ms,
                timer,
                bucket,
                cutoff_ms,
            ),
        )

    def apply_cached(rows: Iterator) -> ApplyStats:
        return cached_task(deltas_of(rows), cache, apply_slice)

    def apply_partition(rows: Iterator) -> Iterator[ApplyStats]:
        if cache is None or spec.store_type.versioned:
            yield timed(timer, "task", lambda: sum((apply_slice(d, None) for d in deltas_of(rows)), ApplyStats()))
        else:
            yield timed(timer, "task", lambda: apply_cached(rows))

    return apply_partition


def cached_task(
    slices: Iterator[list[Delta]],
    cache: CachePlan,
    apply_slice: Callable[[list[Delta], BucketCache], ApplyStats],
    on_open: Callable[[BucketCache], object] | None = None,
) -> ApplyStats:
    """One task's apply with the apply cache: each slice's deltas (anything with a `bucket`:
    Deltas, or a session store's KeyTimes) split by their bucket (a
    task's rows are normally one bucket's), each bucket's file opened once (then
    `on_open(file)`), `apply_slice(deltas, file)` per part, and every file finished once all
    its writes are done, its token in the returned stats for the driver's ledger."""
    files: dict[int, BucketCache] = {}
    try:
        total = ApplyStats()
        for deltas in slices:
            by_bucket: dict[int, list[Delta]] = {}
            numbers = {delta.bucket for delta in deltas}
            if len(numbers) == 1:  # as a task's rows normally are
                by_bucket[numbers.pop()] = deltas
            else:
                for delta in deltas:
                    by_bucket.setdefault(delta.bucket, []).append(delta)
            for number, group in by_bucket.items():
                if number not in files:
                    files[number] = BucketCache.open(cache, number)
                    if on_open is not None:
                        on_open(files[number])
                total += apply_slice(group, files[number])
        tokens = tuple((number, file.finish()) for number, file in files.items())
        return total + ApplyStats(cache_tokens=tokens)
    finally:
        for file in files.values():
            file.close()
        sweep_stale(cache)


def slices_applier(
    config: CassandraConfig,
    spec: StoreSpec,
    batch_id: int,
    write_ts: int,
    slices_of: Callable[[Iterator], Iterator[list]],
    apply_deltas: Callable[..., ApplyStats],
    timer: Timer | None = None,
    cache: CachePlan | None = None,
    on_open: Callable[[BucketCache], object] | None = None,
):
    """A function over one task's rows, run by run_applier: `slices_of` cuts them into bounded
    slices and `apply_deltas(session, spec, batch_id, slice, concurrency, write_ts, timer)`
    applies one, retried within the retry budget on transient Cassandra errors (the window
    applier; repeating a slice is safe). With `cache` (the batch's apply-cache plan; slices of
    Deltas carrying their bucket) each slice goes with its bucket's file as `cache=` (cached_task,
    `on_open` hearing each file opened)."""

    def apply_one(part: list, file: BucketCache | None = None) -> ApplyStats:
        extra = {} if file is None else {"cache": file}
        return with_retries(
            config,
            f"applying batch {batch_id} to store {spec.name}",
            lambda: apply_deltas(
                session_for(config), spec, batch_id, part, config.write_concurrency, write_ts, timer, **extra
            ),
        )

    def apply_partition(rows: Iterator) -> Iterator[ApplyStats]:
        if cache is None:
            yield timed(timer, "task", lambda: sum((apply_one(part) for part in slices_of(rows)), ApplyStats()))
        else:
            yield timed(timer, "task", lambda: cached_task(slices_of(rows), cache, apply_one, on_open))

    return apply_partition


# The most rows (words, or deltas of windows and sessions) the driver collects of a small
# batch to apply it itself; a batch with more goes to the executors after all, so the
# driver's memory stays bounded whatever its few records hold.
DRIVER_ROWS = 100_000
# The widest row the driver collects (a word's bytes, plus 8 per event time of a session row):
# a batch with a wider one goes to the executors, so at most DRIVER_ROWS * DRIVER_ROW_BYTES
# (about 100 MB) crosses, not DRIVER_ROWS words of up to 64 KB each.
DRIVER_ROW_BYTES = 1024


def with_buckets(df, buckets: int | None):
    """`df` (rows of a `word`, and of a `window_start` for window stores) with each row's
    apply-cache bucket as its last column, named `bucket` (None: no cache, `df` as it is):
    Spark's hash partitioning of the apply's grouping key, so a task holds one bucket."""
    if buckets is None:
        return df
    from pyspark.sql import functions as F

    columns = ("word", "window_start") if "window_start" in df.columns else ("word",)
    return df.withColumn("bucket", F.expr(bucket_expression(buckets, columns)))


def run_applier(deltas_df, applier: Callable[[Iterator], Iterator[ApplyStats]], feed=None) -> ApplyStats:
    """Run `applier` (partition_applier's function, or a drop-in with its contract) on the
    executors over a DataFrame of (word, delta, last_ms[, bucket]); the stats of every task,
    summed. A row under UNCOUNTABLE is not applied: its delta comes back as `uncountable`.

    The rows cross from the JVM as Arrow column batches (mapInArrow), not as pickled Rows
    through `DataFrame.rdd`, which also cost the driver a quarter of a second per batch to
    build (BENCHMARKS.md, streaming profile). `feed(batches, applier)` hands a task's Arrow
    batches to `applier` (`applied` by default; the aggregate stage's rows carry their dead
    letters another way: statestore.stream.aggregates.applied).
    """
    feed = applied if feed is None else feed

    def over_arrow(batches):
        spare_zip_rereads()  # for the worker's next tasks (Spark's Python workers are reused)
        for stats in feed(batches, applier):
            yield stats_batch(stats)

    columns = ", ".join(f"{name} {sql_type}" for name, sql_type in _stats_columns())
    tasks = deltas_df.mapInArrow(over_arrow, columns).collect()
    return sum((stats_from_row(task.asDict()) for task in tasks), ApplyStats())


def collect_at_most(df, rows: int, row_bytes: int = DRIVER_ROW_BYTES):
    """`df` collected to the driver as a pyarrow Table, or None when it has more than `rows`
    rows or a row wider than `row_bytes` (its `word`, and its `times` at 8 bytes each): then
    at most rows + 1 rows crossed, none of them wider. The driver's memory stays bounded."""
    from pyspark.sql import functions as F

    heavy = [name for name in ("word", "times") if name in df.columns]
    width = F.lit(0)
    if "word" in heavy:
        width = width + F.coalesce(F.octet_length("word"), F.lit(0))
    if "times" in heavy:
        width = width + 8 * F.greatest(F.size("times"), F.lit(0))
    wide = (width > row_bytes).alias("_wide")
    light = [F.when(~wide, F.col(name)).alias(name) if name in heavy else F.col(name) for name in df.columns]
    table = df.limit(rows + 1).select(*light, wide).toArrow()
    if table.num_rows > rows or any(table["_wide"].to_pylist()):
        return None
    return table.drop_columns(["_wide"])


def apply_on_driver(deltas, applier: Callable[[Iterator], Iterator[ApplyStats]]) -> ApplyStats:
    """run_applier's work done by the driver itself, over a pyarrow Table of the deltas: one
    call of `applier` per apply-cache bucket, as the executors' tasks hold one bucket each (a
    call keeps its buckets' files open to its end, and each file maps a large address range),
    or one call over every row without the cache. For a small batch: no Python worker starts,
    which is most of its time, and all of a cold restart's first batch's (BENCHMARKS.md,
    "Small batches on the driver")."""
    return sum((stats for part in by_bucket(deltas) for stats in applied(part.to_batches(), applier)), ApplyStats())


def by_bucket(deltas) -> list:
    """The Table `deltas` cut into one Table per value of its `bucket` column (the whole
    Table when it has none)."""
    if "bucket" not in deltas.column_names or deltas.num_rows == 0:
        return [deltas]
    import numpy as np

    deltas = deltas.sort_by("bucket")
    buckets = deltas["bucket"].to_numpy()
    starts = [0, *(np.flatnonzero(np.diff(buckets)) + 1).tolist(), deltas.num_rows]
    return [deltas.slice(start, end - start) for start, end in pairwise(starts)]


def applied(batches: Iterable, applier: Callable[[Iterator], Iterator[ApplyStats]]) -> Iterator[ApplyStats]:
    """`applier` over Arrow record batches of (word, delta, last_ms[, bucket]): its stats, then
    (when the batches had any) what was uncountable, as stats of its own."""
    uncountable = 0

    def rows():
        nonlocal uncountable
        for batch in batches:
            uncounted, batch = _without_uncountable(batch)
            uncountable += uncounted
            if "bucket" in batch.schema.names:
                # In the bucket's LMDB order (bytewise, as Arrow sorts binary strings): a
                # cache's lookups and writes in order cost about half (BENCHMARKS.md).
                batch = batch.sort_by([("bucket", "ascending"), ("word", "ascending")])
            yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)

    with collector_paused():
        yield from applier(rows())
    if uncountable:
        yield ApplyStats(uncountable=uncountable)


def _without_uncountable(batch) -> tuple[int, object]:
    """(the deltas of its rows under UNCOUNTABLE, the record batch without them)."""
    import pyarrow.compute as pc

    odd = pc.equal(batch.column(0), UNCOUNTABLE)
    if not pc.any(odd).as_py():
        return 0, batch
    return pc.sum(pc.filter(batch.column(1), odd)).as_py(), batch.filter(pc.invert(odd))


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while an apply runs, and as it was after. An apply
    makes a few short-lived objects per key (rows, deltas, entries, statements), which would start
    a collection every 700 allocations (measured by bench/micro/apply_plan.py).
    What the apply drops is freed by reference counting as before; the few cycles it leaves
    (the Cassandra driver's request futures) wait for the collector's next pass."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _stats_columns() -> list[tuple[str, str]]:
    """(name, Spark SQL type) of the apply job's output: every ApplyStats field, a long each
    but cache_tokens, which crosses as JSON text."""
    return [(f.name, "string" if f.name == "cache_tokens" else "long") for f in fields(ApplyStats)]


def stats_batch(stats: ApplyStats):
    """A task's ApplyStats as the one-row Arrow batch the apply job hands back to Spark (on the
    executor); `stats_from_row` reads its row back on the driver."""
    import pyarrow as pa

    schema = pa.schema(
        [(name, pa.string() if sql_type == "string" else pa.int64()) for name, sql_type in _stats_columns()]
    )
    row = asdict(stats)
    row["cache_tokens"] = json.dumps(stats.cache_tokens)
    return arrow_row(schema, row)


def stats_from_row(row: dict) -> ApplyStats:
    tokens = tuple((int(bucket), token) for bucket, token in json.loads(row.pop("cache_tokens") or "[]"))
    return ApplyStats(**row, cache_tokens=tokens)
