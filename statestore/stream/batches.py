"""Applying micro-batches to a store, and the bookkeeping that makes it exactly-once.

Per batch, on the driver: check the lease, check the checkpoint against the store's registry
row, record the batch as pending (its write timestamp and end offsets), let the executors
apply the counts (statestore.stream.apply), then record the batch as done.

Batch ids in the store are logical: Spark's batch id plus the store's `batch_base`. They only
grow, even across a checkpoint that was lost and recovered from (`--recover-from-store`):
the recovering query finishes the store's pending batch from its recorded offsets, then
continues from the store's position with a base above every id the store has seen.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pyspark.sql import functions as F

from statestore.conn.cassandra import session_for, table_ttl_s
from statestore.conn.kafka import TopicIds, spark_source_options
from statestore.conn.retry import with_retries
from statestore.core.codecs import millis_of
from statestore.core.config import DEFAULT_MAX_FUTURE_MS, CassandraConfig, KafkaConfig
from statestore.core.errors import StateStoreError
from statestore.core.model import StoreSpec
from statestore.store.book import deadletters, registry
from statestore.store.book.lease import StoreLease
from statestore.store.book.stream_log import BatchRecord
from statestore.store.tables import table_for
from statestore.stream import checkpoint
from statestore.stream.apply import (
    DRIVER_ROWS,
    ApplyStats,
    Timer,
    apply_on_driver,
    collect_at_most,
    partition_applier,
    run_applier,
    timed,
    with_buckets,
)
from statestore.stream.apply_cache import CacheLedger, CachePlan
from statestore.stream.apply_sessions import session_applier
from statestore.stream.apply_windows import window_applier
from statestore.stream.faults import pause_driver_if_armed
from statestore.stream.monitor import StreamMonitor
from statestore.stream.transforms import (
    arrow_deltas,
    batch_deltas,
    batch_version_ms,
    dead_letter_rows,
    spread_dead_letters,
    with_future_limit,
    word_times,
)
from statestore.stream.windowed import late_letter_rows, session_deltas, windowed_deltas

_log = logging.getLogger("statestore.stream.batches")
# Where a batch's counts were applied (BatchResult.applied_on).
DRIVER, EXECUTORS = "driver", "executors"
_DEAD_LETTER_CHUNK = 500
_DEAD_LETTER_BYTES = 16 * 1024 * 1024


def _millis(moment) -> int | None:
    return None if moment is None else millis_of(moment)


def now_micros() -> int:
    return time.time_ns() // 1000


def write_ts_for(progress: registry.StoreProgress, logical_batch: int) -> int:
    """A replay reuses its batch's timestamp; a new batch gets one above every earlier batch's."""
    if progress.pending_batch_id == logical_batch and progress.pending_ts is not None:
        return progress.pending_ts
    floor = max(t for t in (progress.last_ts, progress.pending_ts, 0) if t is not None)
    return max(now_micros(), floor + 1)


@dataclass(frozen=True)
class BatchResult:
    batch_id: int
    stats: ApplyStats
    dead_letters: int
    dead_letter_reasons: tuple[tuple[str, int], ...] = ()  # (reason, how many), by reason
    applied_on: str = EXECUTORS  # or DRIVER (on_driver_for)


def write_dead_letters(
    session, batch_df, spec: StoreSpec, batch_id: int, stream_time_ms: int | None = None
) -> Counter[str]:
    """Write the batch's dead letters from the driver; returns how many of each reason. Window
    stores: late records too, by the stream time the batch started with (`stream_time_ms`).

    Called only for a batch whose apply counted something it could not count (ApplyStats.
    uncountable), which is rare: the driver streams them one Spark partition at a time, the
    partitions sized in bytes and rows (spread_dead_letters), and writes them in chunks bounded
    the same way (dead_letter_chunks), rather than starting Python workers on every executor.
    """

    rows = dead_letter_rows(batch_df)
    if spec.windowing is not None:
        rows = rows.unionByName(late_letter_rows(batch_df, spec.windowing, stream_time_ms))
    rows = spread_dead_letters(rows)
    letters = (
        deadletters.DeadLetter(
            r.topic,
            r.partition,
            r.offset,
            r.ts_ms,
            r.reason,
            r.detail,
            None if r.raw is None else bytes(r.raw),
            batch_id,
            stream_time_ms,
        )
        for r in rows.toLocalIterator()
    )
    written: Counter[str] = Counter()
    for chunk in dead_letter_chunks(letters):
        deadletters.write(session, spec.keyspace, spec.name, chunk)
        written.update(d.reason for d in chunk)
    return written


def dead_letter_chunks(
    letters: Iterable[deadletters.DeadLetter], rows: int = _DEAD_LETTER_CHUNK, size: int = _DEAD_LETTER_BYTES
) -> Iterator[list[deadletters.DeadLetter]]:
    """Pure: `letters` in chunks of at most `rows` letters and, past their first letter, at
    most `size` bytes of raw records and details: a driver holds one chunk at a time, and a
    batch of large records (up to Kafka's message size each) does not fill its memory."""
    chunk: list[deadletters.DeadLetter] = []
    held = 0
    for letter in letters:
        weight = len(letter.raw or b"") + len(letter.detail or "")
        if chunk and (len(chunk) >= rows or held + weight > size):
            yield chunk
            chunk, held = [], 0
        chunk.append(letter)
        held += weight
    if chunk:
        yield chunk


@dataclass(frozen=True)
class BatchSeams:
    """Where benchmarks look into a batch or swap one of its steps; the job as shipped uses
    the defaults. `make_applier` builds the executors' apply (partition_applier's signature);
    `dead_letters` writes a batch's dead letters; `driver_timer` hears each driver step
    (lease check, registry progress, checkpoint offsets, first batch start offsets, registry
    begin_batch, apply_batch, dead letters, registry record_batch) and `task_timer` (an
    AccumulatorTimer) the executors' apply phases; `on_batch` sees every applied batch;
    `log_batches` off leaves the batches out of the stream log (what recording them costs)."""

    make_applier: Callable[..., Callable] = partition_applier
    dead_letters: Callable[..., Counter[str]] = write_dead_letters
    driver_timer: Timer | None = None
    task_timer: Timer | None = None
    on_batch: Callable[[BatchResult], None] | None = None
    log_batches: bool = True


SHIPPED = BatchSeams()


@dataclass(frozen=True)
class SourceTopic:
    """The topic a stream reads, and where to ask Kafka for its id."""

    name: str
    ids: TopicIds

    def checked_id(self, progress: registry.StoreProgress, store: str, location: str) -> str | None:
        """The topic's id now (None: no such topic), or CheckpointMismatchError when it is not
        the one the store last read (checkpoint.topic_problem: the topic was created again)."""
        topic_id = self.ids.of(self.name)
        problem = checkpoint.topic_problem(progress, self.name, topic_id)
        if problem is not None:
            raise checkpoint.mismatch_error(store, location, problem, checkpoint.NEW_TOPIC.format(store=store))
        return topic_id


def first_batch_start(batch_df, end_offsets: str) -> str:
    """Where the store's very first batch starts: per partition its lowest offset, or its end
    offset where the batch read nothing. Spark's offset log has no earlier batch to ask."""
    start = json.loads(end_offsets)
    for row in batch_df.groupBy("topic", "partition").agg(F.min("offset").alias("first")).collect():
        start.setdefault(row.topic, {})[str(row.partition)] = row.first
    return json.dumps(start, sort_keys=True, separators=(",", ":"))


def apply_batch(
    config: CassandraConfig,
    spec: StoreSpec,
    batch_df,
    logical: int,
    write_ts: int,
    start_offsets: str,
    end_offsets: str,
    query_id: str | None,
    batch_base: int,
    epoch: int,
    seams: BatchSeams = SHIPPED,
    cache: CachePlan | None = None,
    stream_time_ms: int | None = None,
    driver_records: int = 0,
    max_future_ms: int = DEFAULT_MAX_FUTURE_MS,
) -> BatchResult:
    """Apply one batch's DataFrame of Kafka records as logical batch `logical`, which reads
    from `start_offsets` up to `end_offsets` (Spark's JSON), as the writer of store epoch
    `epoch` (its progress updates are refused once a newer writer took the store). `cache`:
    the batch's apply-cache plan (key-value stores; None reads every key). `stream_time_ms`:
    the store's stream time before this batch (window stores: which windows are closed).
    `driver_records`: a batch of at most this many records is applied by the driver itself
    (on_driver_for; 0: always by the executors). `max_future_ms`: a record whose time is further
    ahead of the batch's clock (`write_ts`, which a replay reuses, so it decides the same way) is
    a dead letter `future` and moves no stream time (transforms.with_future_limit)."""
    return timed(
        seams.driver_timer,
        "apply_batch",
        lambda: _apply_batch(
            config,
            spec,
            batch_df,
            logical,
            write_ts,
            start_offsets,
            end_offsets,
            query_id,
            batch_base,
            epoch,
            seams,
            cache if _cacheable(spec) else None,
            stream_time_ms,
            on_driver_for(start_offsets, end_offsets, driver_records),
            max_future_ms,
        ),
    )


def on_driver_for(start_offsets: str, end_offsets: str, driver_records: int) -> bool:
    """Pure, the rule of where a batch is applied: by the driver when it reads at most
    `driver_records` Kafka records (known from its offsets, before anything runs), else by the
    executors. A small batch's apply is quicker than starting its Python tasks, and on the
    first batch after a restart quicker than starting Python workers at all."""
    if driver_records <= 0:
        return False
    records = checkpoint.records_between(start_offsets, end_offsets)
    return records is not None and records <= driver_records


def _cacheable(spec: StoreSpec) -> bool:
    """The apply cache holds single current entries: not versions, windows or sessions."""
    return not (spec.store_type.versioned or spec.store_type.timed)


def _apply_batch(
    config,
    spec,
    batch_df,
    logical,
    write_ts,
    start_offsets,
    end_offsets,
    query_id,
    batch_base,
    epoch,
    seams,
    cache,
    stream_time_ms,
    on_driver,
    max_future_ms,
) -> BatchResult:
    session = session_for(config)
    clock = seams.driver_timer
    batch_df = with_future_limit(batch_df, write_ts, max_future_ms)
    timed(
        clock,
        "registry begin_batch",
        lambda: with_retries(
            config,
            f"recording batch {logical} of store {spec.name}",
            lambda: registry.begin_batch(
                session, spec, logical, write_ts, start_offsets, end_offsets, query_id, batch_base, epoch
            ),
        ),
    )
    # One Spark job per batch: the apply job also counts what the batch cannot count, and only
    # then (rarely) does the batch go to the dead-letter table, read from Kafka again (the same
    # offsets give the same records). Versioned stores read the batch twice anyway (its largest
    # record time first), so they keep it in memory in between.
    versioned = spec.store_type.versioned
    if versioned:
        batch_df.persist()
    try:
        if versioned:
            # Every word's new version starts at the batch's largest record time, computed
            # once here so all executors (and any replay) agree on it.
            version_ms = batch_version_ms(batch_df)
            applier = seams.make_applier(config, spec, logical, write_ts, version_ms=version_ms, timer=seams.task_timer)
        elif spec.store_type.sessioned:
            applier = session_applier(config, spec, logical, write_ts, timer=seams.task_timer)
        elif spec.windowing is not None:
            applier = window_applier(config, spec, logical, write_ts, timer=seams.task_timer)
        else:
            # Drop-in appliers (benchmarks) take the four arguments, plus timer and cache if used.
            extra = {} if seams.task_timer is None else {"timer": seams.task_timer}
            if cache is not None:
                extra["cache"] = cache
            applier = seams.make_applier(config, spec, logical, write_ts, **extra)
        buckets = None if cache is None else cache.buckets
        late = {} if spec.windowing is None else {"stream_time_ms": stream_time_ms}
        small = _driver_deltas(batch_df, spec, buckets, stream_time_ms) if on_driver else None
        if small is not None:
            stats, applied_on = apply_on_driver(small, applier), DRIVER
        else:
            deltas = with_buckets(_deltas(batch_df, spec, stream_time_ms), buckets)
            stats, applied_on = run_applier(deltas, applier), EXECUTORS
        letters: Counter[str] = Counter()
        if stats.uncountable:
            letters = timed(
                clock,
                "dead letters",
                lambda: with_retries(
                    config, "writing dead letters", lambda: seams.dead_letters(session, batch_df, spec, logical, **late)
                ),
            )
    finally:
        if versioned:
            batch_df.unpersist()
    pause_driver_if_armed(logical)
    timed(
        clock,
        "registry record_batch",
        lambda: with_retries(
            config,
            f"recording batch {logical} of store {spec.name}",
            lambda: registry.record_batch(session, spec, logical, write_ts, end_offsets, stats.max_time_ms, epoch),
        ),
    )
    result = BatchResult(logical, stats, sum(letters.values()), tuple(sorted(letters.items())), applied_on)
    if seams.on_batch is not None:
        seams.on_batch(result)
    return result


def _deltas(batch_df, spec: StoreSpec, stream_time_ms: int | None):
    """The batch's deltas as the store's type counts them (a DataFrame plan)."""
    if spec.store_type.sessioned:
        return session_deltas(batch_df, spec.windowing, stream_time_ms)
    if spec.windowing is not None:
        return windowed_deltas(batch_df, spec.windowing, stream_time_ms)
    return batch_deltas(batch_df, with_uncountable=True)


def _driver_deltas(batch_df, spec: StoreSpec, buckets: int | None, stream_time_ms: int | None):
    """A small batch's deltas on the driver, as a pyarrow Table, or None when it has too many
    rows for the driver (apply.DRIVER_ROWS). Key-value stores collect the batch's words and
    count them in Arrow instead of shuffling every word by key, which was half of a small
    batch's Spark job."""
    if spec.windowing is None:
        words = collect_at_most(word_times(batch_df, buckets), DRIVER_ROWS)
        return None if words is None else arrow_deltas(words)
    return collect_at_most(with_buckets(_deltas(batch_df, spec, stream_time_ms), buckets), DRIVER_ROWS)


class BatchApplier:
    """The foreachBatch function of the word-count query."""

    def __init__(
        self,
        spark,
        config: CassandraConfig,
        spec: StoreSpec,
        location: str,
        lease: StoreLease,
        epoch: int,
        seams: BatchSeams = SHIPPED,
        apply_cache: bool = True,
        monitor: StreamMonitor | None = None,
        driver_records: int = 0,
        source: SourceTopic | None = None,
        max_future_ms: int = DEFAULT_MAX_FUTURE_MS,
    ) -> None:
        self.spark = spark
        self.max_future_ms = max_future_ms  # records further ahead of the batch's clock: dead letters
        self.source = source  # checked at every batch: the topic was not created again
        self.driver_records = driver_records  # batches of at most this many records: on the driver
        self.monitor = monitor  # records each committed batch (statestore.stream.monitor)
        self.epoch = epoch
        # The apply cache's tokens of the last batch (statestore.stream.apply_cache); None: off.
        self.ledger = CacheLedger() if apply_cache else None
        self.seams = seams
        self.config = config
        self.spec = spec
        self.location = location
        self.lease = lease
        self.query_id: str | None = None
        self.started = threading.Event()
        self.last: BatchResult | None = None

    def position(self, progress: registry.StoreProgress, batch_id: int, end_offsets: str) -> tuple[int, int]:
        """(logical batch id, batch base) of Spark batch `batch_id`, which ends at `end_offsets`,
        or CheckpointMismatchError (checkpoint.position_problem says when)."""
        if not progress.has_batches:
            if batch_id > 0:
                raise checkpoint.mismatch_error(
                    self.spec.name,
                    self.location,
                    f"the store holds no batches (reset while this query ran?), but this checkpoint is at "
                    f"batch {batch_id}",
                    checkpoint.START_OVER,
                )
            return batch_id, 0
        seen = max(b for b in (progress.last_batch_id, progress.pending_batch_id) if b is not None)
        if progress.query_id == self.query_id:
            base = progress.batch_base
        elif batch_id == 0:
            # The first batch of a new checkpoint that start() allowed (--recover-from-store,
            # which already finished the pending batch): continue above every id seen.
            base = seen + 1
        else:
            raise checkpoint.mismatch_error(
                self.spec.name,
                self.location,
                f"the store was last written by query {progress.query_id}, not by this checkpoint's",
            )
        logical = base + batch_id
        problem = checkpoint.position_problem(progress, logical, end_offsets)
        if problem is not None:
            raise checkpoint.mismatch_error(self.spec.name, self.location, problem)
        return logical, base

    def __call__(self, batch_df, batch_id: int) -> None:
        # start() sets the query id right after Spark created the query; the first batch can
        # be quicker than that.
        if not self.started.wait(timeout=120):
            raise StateStoreError("the streaming query did not report its id within 120 s")
        began = time.monotonic()
        clock = self.seams.driver_timer
        timed(clock, "lease check", lambda: with_retries(self.config, "renewing the store's lease", self.lease.check))
        session = session_for(self.config)
        progress = timed(
            clock,
            "registry progress",
            lambda: with_retries(
                self.config,
                "reading the store's progress",
                lambda: registry.progress(session, self.spec.keyspace, self.spec.name),
            ),
        )
        if self.source is not None:
            timed(clock, "topic id", lambda: self.source.checked_id(progress, self.spec.name, self.location))
        offsets = timed(
            clock, "checkpoint offsets", lambda: checkpoint.batch_end_offsets(self.spark, self.location, batch_id)
        )
        logical, base = self.position(progress, batch_id, offsets)
        start = progress.offsets or timed(
            clock, "first batch start offsets", lambda: self.first_start(batch_df, batch_id, offsets)
        )
        plan = self.cache_plan(session, progress, logical, batch_df)
        try:
            result = apply_batch(
                self.config,
                self.spec,
                batch_df,
                logical,
                write_ts_for(progress, logical),
                start,
                offsets,
                self.query_id,
                base,
                self.epoch,
                self.seams,
                plan,
                _millis(progress.max_event_time),
                self.driver_records,
                self.max_future_ms,
            )
        except BaseException:
            if self.ledger is not None:
                self.ledger.forget()
            raise
        if plan is not None:
            tokens = dict(result.stats.cache_tokens)
            self.ledger.record(logical, plan.buckets, progress.outside_writes, tokens)
        self.last = result
        if self.monitor is not None and self.seams.log_batches:
            seconds = time.monotonic() - began
            times = [t for t in (_millis(progress.max_event_time), result.stats.max_time_ms) if t is not None]
            high_water = max(times) if times else None
            self.monitor.batch(
                batch_record(logical, batch_id, self.monitor.run_id, result, seconds, offsets, high_water)
            )
        _log.info(
            "batch %d (spark %d) of store %s, applied on the %s: %d keys, %d written, %d already applied, "
            "%d dead letters, %.1fs",
            logical,
            batch_id,
            self.spec.name,
            result.applied_on,
            result.stats.keys,
            result.stats.written,
            result.stats.skipped,
            result.dead_letters,
            time.monotonic() - began,
        )

    def first_start(self, batch_df, batch_id: int, end_offsets: str) -> str:
        """Where the store's very first batch starts: the offsets Spark resolved for the
        checkpoint's first batch when this is it (read from the checkpoint) and they fit its
        end, else found in the batch itself (a Spark job reading it once more)."""
        known = checkpoint.initial_offsets(self.spark, self.location) if batch_id == 0 else None
        if known is not None and checkpoint.starts_batch(known, end_offsets):
            return known
        return first_batch_start(batch_df, end_offsets)

    def cache_plan(self, session, progress: registry.StoreProgress, logical: int, batch_df) -> CachePlan | None:
        """The apply cache's plan of this batch (None: the cache is off or cannot serve the store)."""
        if self.ledger is None or not _cacheable(self.spec):
            return None
        ttl = with_retries(
            self.config,
            f"reading the TTL of store {self.spec.name}",
            lambda: table_ttl_s(session, self.spec.keyspace, self.spec.table),
        )
        if not self.ledger.admits(ttl, time.monotonic()):
            return None
        buckets = int(batch_df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
        # Files may start complete only at the store's very first batch, when it holds nothing.
        fresh = not progress.has_batches and self._store_is_empty(session)
        store = f"{self.spec.keyspace}.{self.spec.name}"
        return self.ledger.plan(store, logical, buckets, progress.outside_writes, fresh)

    def _store_is_empty(self, session) -> bool:
        table = table_for(self.spec)
        return with_retries(
            self.config,
            f"checking whether store {self.spec.name} is empty",
            lambda: next(iter(table.scan_unordered(session, page_size=1)), None) is None,
        )


def batch_record(
    logical: int,
    spark_batch_id: int | None,
    run_id: str | None,
    result: BatchResult,
    seconds: float,
    offsets: str,
    max_event_time_ms: int | None,
) -> BatchRecord:
    """What the stream log keeps of a committed batch."""
    stats = result.stats
    return BatchRecord(
        logical,
        spark_batch_id,
        run_id,
        None,
        stats.keys,
        stats.written,
        stats.skipped,
        stats.words,
        result.dead_letters,
        round(seconds, 3),
        offsets,
        max_event_time_ms,
        result.dead_letter_reasons,
    )


def finish_pending_batch(
    spark,
    config: CassandraConfig,
    spec: StoreSpec,
    kafka: KafkaConfig,
    epoch: int,
    seams: BatchSeams = SHIPPED,
    driver_records: int = 0,
    max_future_ms: int = DEFAULT_MAX_FUTURE_MS,
) -> BatchResult | None:
    """Complete the store's pending batch (started, maybe half written, never recorded as
    done) by reading exactly its offsets from Kafka again. Replay-safe: rows it already wrote
    are skipped. `driver_records`, `max_future_ms`: as apply_batch's."""
    session = session_for(config)
    progress = registry.progress(session, spec.keyspace, spec.name)
    pending = progress.pending_batch_id
    if pending is None or (progress.last_batch_id is not None and progress.last_batch_id >= pending):
        return None
    if progress.pending_offsets is None:
        raise checkpoint.mismatch_error(
            spec.name, "(unknown)", f"batch {pending} has no recorded offsets to finish it from"
        )
    batch_df = (
        spark.read.format("kafka")
        .options(**spark_source_options(kafka))
        .option("subscribe", ",".join(sorted(json.loads(progress.pending_offsets))))
        .option("startingOffsets", progress.offsets)
        .option("endingOffsets", progress.pending_offsets)
        .load()
    )
    _log.info("store %s: finishing pending batch %d from the recorded offsets", spec.name, pending)
    return apply_batch(
        config,
        spec,
        batch_df,
        pending,
        progress.pending_ts,
        progress.offsets,
        progress.pending_offsets,
        progress.query_id,
        progress.batch_base,
        epoch,
        seams,
        stream_time_ms=_millis(progress.max_event_time),
        driver_records=driver_records,
        max_future_ms=max_future_ms,
    )
