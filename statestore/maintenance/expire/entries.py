"""Expiry: delete entries older than a retention, in stream time or processing time.

Spark tasks scan the store by token range, reading each entry's event time and the write
time of its value, pick what `selection.is_expired` says, and delete each pick `USING
TIMESTAMP` of the write time they read. Cassandra's last-write-wins then settles any race:
an update that lands between the read and the delete carries a later timestamp (the stream
writes every batch above the previous ones, statestore.stream.position.write_ts_for), so it wins
over the delete and the entry survives with its new value. Nothing is locked and no
lightweight transaction is needed.

Before the first delete the run is recorded with its cutoff (statestore.store.book.history),
which validation needs to judge counts after an expiry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from cassandra.cluster import EXEC_PROFILE_DEFAULT
from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType

from statestore.conn.cassandra import check_writer_scope, prepare, session_for, table_ttl_s
from statestore.core.codecs import millis_of
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError, UnsupportedOperationError
from statestore.core.event_time import instant_to_millisecond
from statestore.core.model import StoreSpec
from statestore.maintenance.expire.segments import expire_window_store, refuse_future_cutoff
from statestore.maintenance.shared.scan import TableShape, default_ranges, run_over_ranges, shape_of, token_splits
from statestore.maintenance.shared.selection import Cutoff, TimeBasis, expiry_cutoff, is_expired
from statestore.store.book import history, registry
from statestore.store.tables.paging import paged

_log = logging.getLogger("statestore.maintenance.expire.entries")
_SAMPLE = 20
_DELETE_CHUNK = 2000
_BATCH_ROWS = 50


@dataclass(frozen=True)
class ExpireOptions:
    basis: TimeBasis
    # Stores without a retention of their own (a store's own wins: statestore.core.retention);
    # None: only stores that have one, and window stores, which expire by their windowing's.
    retention_ms: int | None
    dry_run: bool = False
    token_ranges: int | None = None
    page_size: int = 5000
    concurrency: int = 64


@dataclass
class ExpirySummary:
    """What one task did; `merge` adds them up (pure)."""

    scanned: int = 0
    expired: int = 0
    undated: int = 0
    seconds: float = 0.0
    sample: list[str] = field(default_factory=list)

    def merge(self, other: ExpirySummary) -> ExpirySummary:
        return ExpirySummary(
            self.scanned + other.scanned,
            self.expired + other.expired,
            self.undated + other.undated,
            self.seconds + other.seconds,
            (self.sample + other.sample)[:_SAMPLE],
        )


def _select(shape: TableShape) -> str:
    """Key columns, the event time, then the write time of every cell: the delete takes the
    newest, so it covers the whole row as read, and nothing written after it."""
    stamps = (f"writetime({cell})" for cell in shape.cells)
    columns = ", ".join((*shape.key_columns, "time", *stamps))
    return f"SELECT {columns} FROM {shape.qualified} WHERE {shape.token()} >= ? AND {shape.token()} <= ?"


def _deletes(session, shape: TableShape, picks: list[tuple], concurrency: int) -> None:
    """Delete `picks` (key column values + the write time read); rows of one partition go in
    single-partition unlogged batches, each statement with its own timestamp."""
    delete = prepare(session, shape.delete_row(timestamped=True))
    delete.is_idempotent = True
    n_pk = len(shape.partition_key)
    work, batch, batch_key = [], None, None
    for *key, writetime in picks:
        params = (writetime, *key)
        if not shape.clustering:
            work.append((delete, params))
            continue
        if batch is None or tuple(key[:n_pk]) != batch_key or len(batch) >= _BATCH_ROWS:
            batch, batch_key = BatchStatement(batch_type=BatchType.UNLOGGED), tuple(key[:n_pk])
            batch.is_idempotent = True
            work.append((batch, ()))
        batch.add(delete, params)
    execute_concurrent(session, work, concurrency=concurrency, raise_on_first_error=True)


def expire_range(
    session,
    shape: TableShape,
    token_range: tuple[int, int],
    cutoff: Cutoff,
    options: ExpireOptions,
    before_delete: Callable[[list[tuple]], None] | None = None,
) -> ExpirySummary:
    """Expire one token range; `before_delete` sees each chunk of picks before it is deleted
    (tests use it to race an update against the delete)."""
    select = prepare(session, _select(shape))
    select.is_idempotent = True
    summary, picks = ExpirySummary(), []
    n_key = len(shape.key_columns)
    began = time.monotonic()

    def flush() -> None:
        if picks and not options.dry_run:
            if before_delete is not None:
                before_delete(list(picks))
            _deletes(session, shape, picks, options.concurrency)
        picks.clear()

    for row in paged(session, select, token_range, options.page_size, EXEC_PROFILE_DEFAULT):
        summary.scanned += 1
        event_ms = None if row[n_key] is None else millis_of(row[n_key])
        written = max((ts for ts in row[n_key + 1 :] if ts is not None), default=None)
        verdict = is_expired(cutoff, event_ms, written)
        if verdict is None:
            summary.undated += 1
        elif verdict:
            summary.expired += 1
            picks.append((*row[:n_key], written))
            if len(summary.sample) < _SAMPLE:
                summary.sample.append(_describe_key(row[n_key - 1]))
            if len(picks) >= _DELETE_CHUNK:
                flush()
    flush()
    summary.seconds = time.monotonic() - began
    return summary


def _describe_key(key) -> str:
    raw = bytes(key)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + raw[:64].hex()


def expire_task(config: CassandraConfig, targets: list[tuple[TableShape, Cutoff]], options: ExpireOptions):
    def run(items: Iterator[tuple[int, tuple[int, int]]]) -> Iterator[tuple[int, ExpirySummary]]:

        session = session_for(config)
        for index, token_range in items:
            shape, cutoff = targets[index]
            yield index, expire_range(session, shape, token_range, cutoff, options)

    return run


@dataclass
class StoreExpiry:
    store: str
    store_type: str
    basis: str
    retention_ms: int
    cutoff: str
    cutoff_ms: int
    stream_time: str | None
    scanned: int
    removed: int
    kept: int
    undated: int
    dry_run: bool
    table_ttl_s: int | None
    removed_sample: list[str]
    task_seconds: float
    # What scanned/removed/kept count: entries (key-value stores) or segments (window stores,
    # statestore.maintenance.expire.segments).
    unit: str = "entries"
    reclaim: str | None = None  # window stores: freeing the dropped segments' bytes


@dataclass
class ExpiryReport:
    keyspace: str
    generated_at: str
    seconds: float
    rows_per_s: float
    stores: list[StoreExpiry]


def _check_expirable(spec: StoreSpec, options: ExpireOptions) -> None:
    if spec.store_type.versioned:
        raise UnsupportedOperationError(
            f"store '{spec.name}' is {spec.store_type.value}: expire its history with "
            "jobs/compact_state.py --history-retention instead"
        )
    if retention_for(spec, options) is None and not spec.store_type.timed:
        raise ConfigError(
            f"store '{spec.name}' is a {spec.store_type.value} store without a retention of its own: give "
            "--retention (e.g. 7d) to expire it, or give the store one (statestore set-retention)"
        )


def retention_for(spec: StoreSpec, options: ExpireOptions) -> int | None:
    """The retention a key-value store expires by: its own when it has one (what its readers
    already hide), else the run's --retention."""
    return spec.retention_ms if spec.retention_ms is not None else options.retention_ms


def _check_cutoff_not_ahead(session, spec: StoreSpec, options: ExpireOptions, now_ms: int) -> None:
    """FutureStreamTimeError when `spec` expires by its stream time (window and session stores
    always, key-value stores on the stream basis) and that cutoff is later than `now_ms`."""
    if spec.store_type.timed:
        retention = spec.windowing.retention_ms
    elif options.basis == TimeBasis.STREAM:
        retention = retention_for(spec, options)
    else:
        return
    moment = registry.progress(session, spec.keyspace, spec.name).max_event_time
    if moment is not None:  # no stream time: the store's own expiry says so
        stream_ms = millis_of(moment)
        refuse_future_cutoff(spec, stream_ms - retention, stream_ms, now_ms)


def _window_result(session, spec: StoreSpec, options: ExpireOptions, nodetool) -> StoreExpiry:
    done = expire_window_store(session, spec, options.dry_run, nodetool)
    return StoreExpiry(
        store=spec.name,
        store_type=spec.store_type.value,
        basis=TimeBasis.STREAM.value,
        retention_ms=done.retention_ms,
        cutoff=instant_to_millisecond(done.cutoff_ms),
        cutoff_ms=done.cutoff_ms,
        stream_time=instant_to_millisecond(done.stream_ms),
        scanned=done.found,
        removed=done.removed,
        kept=done.found - len(done.expired),
        undated=0,
        dry_run=options.dry_run,
        table_ttl_s=table_ttl_s(session, spec.keyspace, spec.table),
        removed_sample=done.sample(),
        task_seconds=round(done.seconds, 2),
        unit="segments",
        reclaim=done.reclaim,
    )


@dataclass(frozen=True)
class _KeyValueRun:
    """A key-value store's part of one expiry: its cutoff and the stream time it was taken
    from, and `run_at`, the history row that records the run (cutoff first, counts at the end)."""

    spec: StoreSpec
    shape: TableShape
    cutoff: Cutoff
    stream_ms: int | None
    run_at: datetime
    retention_ms: int


def expire(
    spark, session, config: CassandraConfig, stores: list[str], options: ExpireOptions, nodetool=None
) -> ExpiryReport:
    """Expire `stores`: key-value stores in one Spark job, each store's cutoff recorded before
    any delete; window stores by dropping their expired segments, by their own retention in
    stream time, then freeing their bytes with `nodetool` (statestore.maintenance.expire.segments).
    Its deletes are writes a stream decides on: levels that do not overlap across the keyspace's
    data centers are refused first (check_writer_scope)."""
    check_writer_scope(session, config.keyspace)
    history.ensure_table(session, config.keyspace)
    looked_up = [registry.lookup(session, config.keyspace, name) for name in stores]
    now_ms = int(time.time() * 1000)
    for spec in looked_up:  # every refusal before any delete
        _check_expirable(spec, options)
        _check_cutoff_not_ahead(session, spec, options, now_ms)
    window_results = [_window_result(session, spec, options, nodetool) for spec in looked_up if spec.store_type.timed]
    runs = [_begin_run(session, spec, options, now_ms) for spec in looked_up if not spec.store_type.timed]
    ranges = token_splits(options.token_ranges or default_ranges(spark))
    began = time.monotonic()
    summaries = _delete_expired(spark, session, config, runs, ranges, options)
    seconds = time.monotonic() - began
    results = [_finish_run(session, run, summary, options) for run, summary in zip(runs, summaries, strict=True)]
    scanned = sum(r.scanned for r in results)
    results += window_results
    return ExpiryReport(
        keyspace=config.keyspace,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        seconds=round(seconds, 2),
        rows_per_s=round(scanned / seconds, 1) if seconds > 0 else 0.0,
        stores=results,
    )


def _begin_run(session, spec: StoreSpec, options: ExpireOptions, now_ms: int) -> _KeyValueRun:
    """Take a key-value store's cutoff (refused when ahead of now in stream time) and record
    the run with it in the store's history, before any delete: validation reads it."""
    progress = registry.progress(session, spec.keyspace, spec.name)
    stream_ms = None if progress.max_event_time is None else millis_of(progress.max_event_time)
    retention_ms = retention_for(spec, options)
    cutoff = expiry_cutoff(options.basis, retention_ms, stream_ms, now_ms)
    if cutoff.basis == TimeBasis.STREAM:
        refuse_future_cutoff(spec, cutoff.at_ms, stream_ms, now_ms)
    run_at = history.now()
    status = "dry-run" if options.dry_run else "running"
    history.record(session, spec.keyspace, spec.name, history.EXPIRE, run_at, status, cutoff.at_ms)
    return _KeyValueRun(spec, shape_of(session, spec), cutoff, stream_ms, run_at, retention_ms)


def _delete_expired(
    spark,
    session,
    config: CassandraConfig,
    runs: list[_KeyValueRun],
    ranges: list[tuple[int, int]],
    options: ExpireOptions,
) -> list[ExpirySummary]:
    """Scan every store of `runs` over `ranges` in one Spark job and delete what is expired
    (nothing on a dry run); each store's summary, in the order of `runs`. A failure records
    every run as failed."""
    targets = [(run.shape, run.cutoff) for run in runs]
    work = [(index, token_range) for index in range(len(targets)) for token_range in ranges]
    summaries = [ExpirySummary() for _ in targets]
    # A stream's apply cache must not trust what it wrote across these deletes (registry doc).
    marked = [] if options.dry_run else [run.spec for run in runs]
    _mark_outside_writes(session, marked, ongoing=True)
    try:
        if work:
            for index, part in run_over_ranges(spark, work, expire_task(config, targets, options), "expiring"):
                summaries[index] = summaries[index].merge(part)
    except BaseException:
        if not options.dry_run:
            for run in runs:
                _record(session, run, "failed")
        raise
    finally:
        # Deletes of a failed run are over too; only a killed job leaves the mark "in progress"
        # (the stream then runs without its cache until the next expiry ends).
        _mark_outside_writes(session, marked, ongoing=False)
    return summaries


def _mark_outside_writes(session, specs: list[StoreSpec], ongoing: bool) -> None:
    """Set or clear, on each of `specs`, the registry's mark that something other than its stream is writing it."""
    for spec in specs:
        registry.mark_outside_writes(session, spec, ongoing=ongoing, now_us=time.time_ns() // 1000)


def _finish_run(session, run: _KeyValueRun, summary: ExpirySummary, options: ExpireOptions) -> StoreExpiry:
    """A key-value store's report, its counts recorded in the run's history row (done, or dry-run)."""
    spec, cutoff = run.spec, run.cutoff
    result = StoreExpiry(
        store=spec.name,
        store_type=spec.store_type.value,
        basis=cutoff.basis.value,
        retention_ms=run.retention_ms,
        cutoff=instant_to_millisecond(cutoff.at_ms),
        cutoff_ms=cutoff.at_ms,
        stream_time=instant_to_millisecond(run.stream_ms),
        scanned=summary.scanned,
        removed=0 if options.dry_run else summary.expired,
        kept=summary.scanned - summary.expired,
        undated=summary.undated,
        dry_run=options.dry_run,
        table_ttl_s=table_ttl_s(session, spec.keyspace, spec.table),
        removed_sample=summary.sample,
        task_seconds=round(summary.seconds, 2),
    )
    status = "dry-run" if options.dry_run else "done"
    counts = {"scanned": result.scanned, "removed": result.removed, "would_remove": summary.expired}
    _record(session, run, status, counts)
    _log.info("store %s: %s", spec.name, counts)
    return result


def _record(session, run: _KeyValueRun, status: str, counts: dict | None = None) -> None:
    """Update the run's history row: its status, and its counts once it is done."""
    history.record(
        session, run.spec.keyspace, run.spec.name, history.EXPIRE, run.run_at, status, run.cutoff.at_ms, counts
    )
