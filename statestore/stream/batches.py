"""The word-count query's foreachBatch function, and the finish of a store's pending batch.

Per batch, on the driver: check the lease, the topic and the checkpoint against the store's
registry row, build the batch's position (statestore.stream.position), apply the batch at that
position (statestore.stream.batch_apply: recorded as begun, applied, recorded as done), then
log it in the stream log. The rule it keeps: nothing of a batch is written before those checks
pass, and a batch is applied only at a position the store's history allows.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace

from statestore.conn.cassandra import session_for, table_ttl_with_schema
from statestore.conn.kafka import spark_source_options
from statestore.conn.retry import with_retries
from statestore.core.aggregation import AGGREGATE_FORMAT_PREFIX, AggregateSpec
from statestore.core.config import KafkaConfig
from statestore.core.errors import StateStoreError
from statestore.store.book import registry
from statestore.store.book.lease import StoreLease
from statestore.store.book.registry import BatchPosition, InputSettings, KafkaOffsets, StoreProgress
from statestore.store.tables import session_table_for, table_for, window_table_for
from statestore.stream import checkpoint
from statestore.stream.apply import ApplyStats, timed
from statestore.stream.apply_cache import CacheLedger, CachePlan, batch_cache_plan
from statestore.stream.batch_apply import apply_batch, cacheable
from statestore.stream.checkpoint import QueryCheckpoint
from statestore.stream.json_input import JsonInput
from statestore.stream.monitor import StreamMonitor
from statestore.stream.position import (
    SourceTopic,
    batch_rules,
    checked_batch_id,
    first_start,
    naming_partitions,
    partitions_of,
    pending_position,
    recorded_done,
    stream_time_ms,
    write_ts_for,
)
from statestore.stream.recording import batch_record
from statestore.stream.writer import NOWHERE, BatchResult, StoreWriter

_log = logging.getLogger("statestore.stream.batches")


class BatchApplier:
    """The foreachBatch function of the word-count query: Spark calls it with each batch's
    DataFrame of Kafka records and Spark's id of the batch."""

    def __init__(
        self,
        writer: StoreWriter,
        query_checkpoint: QueryCheckpoint,
        lease: StoreLease,
        source: SourceTopic | None = None,
        monitor: StreamMonitor | None = None,
    ) -> None:
        self.writer = writer
        self.checkpoint = query_checkpoint
        self.lease = lease
        self.source = source  # checked at every batch: the topic was not created again
        self.monitor = monitor  # records each committed batch (statestore.stream.monitor)
        # The apply cache's tokens of the last batch (statestore.stream.apply_cache); None: off.
        self.ledger = CacheLedger() if writer.apply_cache else None
        self.query_id: str | None = None
        self.started = threading.Event()
        self.last: BatchResult | None = None

    def __call__(self, batch_df, spark_batch_id: int) -> None:
        # start() sets the query id right after Spark created the query; the first batch can
        # be quicker than that.
        if not self.started.wait(timeout=120):
            raise StateStoreError("the streaming query did not report its id within 120 s")
        began = time.monotonic()
        progress = self._checked_progress()
        position = self._position(progress, batch_df, spark_batch_id)
        if recorded_done(progress, position.batch_id):
            self._already_done(position, began)
            return
        session = session_for(self.writer.config)
        plan = self.cache_plan(session, progress, position.batch_id, batch_df)
        try:
            result = apply_batch(self.writer, batch_df, position, plan)
        except BaseException:
            if self.ledger is not None:
                self.ledger.forget()
            raise
        if plan is not None:
            self.ledger.record(position.batch_id, plan.buckets, progress.outside_writes, result.stats.cache_tokens)
        self.last = result
        self._log_batch(position, result, began)

    def _checked_progress(self) -> StoreProgress:
        """The store's progress, once the lease is still this writer's and the topic is the one
        the store read."""
        writer = self.writer
        writer.step("lease check", "renewing the store's lease", self.lease.check)
        session = session_for(writer.config)
        progress = writer.step(
            "registry progress",
            "reading the store's progress",
            lambda: registry.progress(session, writer.spec.keyspace, writer.spec.name),
        )
        if self.source is not None:
            timed(
                writer.timer,
                "topic id",
                lambda: self.source.checked_id(progress, writer.spec.name, self.checkpoint.location),
            )
        return progress

    def _position(self, progress: StoreProgress, batch_df, spark_batch_id: int) -> BatchPosition:
        """The position of Spark batch `spark_batch_id`, once the store's history allows it
        (position.checked_batch_id)."""
        timer, store = self.writer.timer, self.writer.spec.name
        end = timed(timer, "checkpoint offsets", lambda: self.checkpoint.end_offsets(spark_batch_id))
        batch_id, base = checked_batch_id(progress, spark_batch_id, end, self.query_id, store, self.checkpoint.location)
        start = KafkaOffsets.parse_stored(progress.offsets) or timed(
            timer, "first batch start offsets", lambda: first_start(self.checkpoint, batch_df, spark_batch_id, end)
        )
        rules = batch_rules(progress, batch_id, self.writer.max_future_ms)
        return BatchPosition(
            batch_id=batch_id,
            write_ts=write_ts_for(progress, batch_id),
            start=start,
            end=end,
            query_id=self.query_id,
            batch_base=base,
            spark_batch_id=spark_batch_id,
            stream_time_ms=stream_time_ms(progress),
            retention_ms=rules.retention_ms,
            max_future_ms=rules.max_future_ms,
        )

    def _already_done(self, position: BatchPosition, began: float) -> None:
        """A batch the store recorded as done, run again by Spark (position.recorded_done):
        nothing is written or recorded; seams and the driver's log still hear of it."""
        result = BatchResult(batch_id=position.batch_id, stats=ApplyStats(), dead_letters=0, applied_on=NOWHERE)
        self.last = result
        if self.writer.seams.on_batch is not None:
            self.writer.seams.on_batch(result)
        _log.info(
            "batch %d (spark %d) of store %s was recorded as done already: nothing applied, %.1fs",
            position.batch_id,
            position.spark_batch_id,
            self.writer.spec.name,
            time.monotonic() - began,
        )

    def _log_batch(self, position: BatchPosition, result: BatchResult, began: float) -> None:
        """The batch in the stream log (unless the seams leave it out) and in the driver's log."""
        if self.monitor is not None and self.writer.seams.log_batches:
            self.monitor.batch(batch_record(position, self.monitor.run_id, result, time.monotonic() - began))
        stats = result.stats
        _log.info(
            "batch %d (spark %d) of store %s, applied on the %s: %d keys, %d read from Cassandra, %d written, "
            "%d already applied, %d dead letters, %.1fs",
            position.batch_id,
            position.spark_batch_id,
            self.writer.spec.name,
            result.applied_on,
            stats.keys,
            stats.read,
            stats.written,
            stats.skipped,
            result.dead_letters,
            time.monotonic() - began,
        )

    def cache_plan(self, session, progress: StoreProgress, batch_id: int, batch_df) -> CachePlan | None:
        """The apply cache's plan of this batch (None: the cache is off or cannot serve the store)."""
        spec = self.writer.spec
        if not cacheable(spec):
            return None
        # Read and recorded with the cache off too: a later run with it on must know of the rows
        # this one writes under a table TTL, even if the TTL is gone by then.
        table = with_retries(
            self.writer.config,
            f"reading the TTL of store {spec.name} and the schema versions",
            lambda: table_ttl_with_schema(session, spec.keyspace, spec.table),
        )
        recorded = None if progress.ttl_expiring_until is None else progress.ttl_expiring_until / 1000
        mark, plan = batch_cache_plan(
            self.ledger,
            f"{spec.keyspace}.{spec.name}",
            batch_id,
            lambda: int(batch_df.sparkSession.conf.get("spark.sql.shuffle.partitions")),
            progress.outside_writes,
            recorded,
            progress.has_batches,
            table,
            time.time(),
            lambda: self._store_is_empty(session),
        )
        if mark is not None:
            with_retries(
                self.writer.config,
                f"recording until when rows of store {spec.name} may expire",
                lambda: registry.record_ttl_expiry(session, spec, int(mark * 1000)),
            )
        return plan

    def _store_is_empty(self, session) -> bool:
        spec = self.writer.spec
        return not with_retries(
            self.writer.config, f"checking whether store {spec.name} is empty", lambda: _holds_rows(session, spec)
        )


def _holds_rows(session, spec) -> bool:
    """Whether the store holds any row (one asked for, not a scan)."""
    if spec.store_type.sessioned:
        return session_table_for(spec).has_rows(session)
    if spec.store_type.windowed:
        return window_table_for(spec).has_rows(session)
    return next(iter(table_for(spec).scan_unordered(session, page_size=1)), None) is not None


def finish_pending_batch(spark, writer: StoreWriter, kafka: KafkaConfig) -> BatchResult | None:
    """Complete the store's pending batch (begun, maybe half written, never recorded as done)
    by reading exactly its offsets from Kafka again: a replay of its recorded position, so rows
    it already wrote are skipped. None when the store has no pending batch."""
    spec = writer.spec
    progress = registry.progress(session_for(writer.config), spec.keyspace, spec.name)
    pending = progress.unfinished_batch
    if pending is None:
        return None
    if progress.pending_offsets is None:
        raise checkpoint.mismatch_error(
            spec.name, "(unknown)", f"batch {pending} has no recorded offsets to finish it from"
        )
    position = pending_position(progress, writer.max_future_ms)
    if isinstance(writer.json_input, JsonInput):
        # Read as the store's recorded input settings say, whatever this run was given (as its rules).
        recorded = registry.input_settings(session_for(writer.config), spec.keyspace, spec.name)
        writer = replace(writer, json_input=stored_json_input(spec.value_codec, recorded) or writer.json_input)
    # Exactly the partitions the batch's end names: its start may lack one added meanwhile, and
    # the topic may have gained more since (position.naming_partitions).
    assigned = partitions_of(position.end)
    batch_df = (
        spark.read.format("kafka")
        .options(**spark_source_options(kafka))
        .option("assign", json.dumps(assigned))
        .option("startingOffsets", naming_partitions(position.start, assigned).as_json())
        .option("endingOffsets", position.end.as_json())
        .load()
    )
    _log.info("store %s: finishing pending batch %d from the recorded offsets", spec.name, pending)
    return apply_batch(writer, batch_df, position)


def stored_json_input(value_format: str, settings: InputSettings | None) -> JsonInput | None:
    """The JSON input stage a store's registry records: its measures (the value format) read
    with its input settings; None when it records none (text lines, the word count). A store's
    recovery and its validation read its records with it, whatever a run is given."""
    if settings is None or settings.format != "json" or not value_format.startswith(AGGREGATE_FORMAT_PREFIX):
        return None
    aggregate = AggregateSpec.parse(value_format.removeprefix(AGGREGATE_FORMAT_PREFIX))
    return JsonInput(aggregate, settings.key_fields, settings.key_expr, settings.time_field)
