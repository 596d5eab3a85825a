"""One batch's apply, run by the driver: record it as begun, apply its counts, write its dead
letters, record it as done.

The counts are applied by the executors (statestore.stream.apply, the replay-safe apply), or
by the driver itself when the batch is small enough to be known from its offsets
(on_driver_for). The rule it keeps: everything a batch decides is decided from its position
(registry.BatchPosition), so a replay of the batch decides the same: the same offsets give the
same records, the same write timestamp the same clock for records from the future, the same
stream time the same closed windows.

A store of JSON records (the writer's json_input) goes through stages of its own instead, the
input stage (statestore.stream.json_input) and the aggregate stage (statestore.stream.aggregates),
under the same rule.
"""

from __future__ import annotations

from collections import Counter

from statestore.conn.cassandra import session_for
from statestore.core.aggregation import AGGREGATE_FORMAT_PREFIX
from statestore.core.model import StoreSpec
from statestore.core.retention import cutoff_ms
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.stream import aggregates, checkpoint, json_input, recording, session_aggregates
from statestore.stream.apply import (
    DRIVER_ROWS,
    ApplyStats,
    apply_on_driver,
    collect_at_most,
    run_applier,
    timed,
    with_buckets,
)
from statestore.stream.apply_cache import CachePlan
from statestore.stream.apply_panes import pane_applier, with_pane_buckets
from statestore.stream.apply_sessions import session_applier
from statestore.stream.apply_windows import window_applier
from statestore.stream.faults import pause_driver_if_armed
from statestore.stream.transforms import arrow_deltas, batch_deltas, batch_version_ms, with_future_limit, word_times
from statestore.stream.windowed import pane_deltas, session_deltas, windowed_deltas
from statestore.stream.writer import DRIVER, EXECUTORS, BatchResult, StoreWriter


def apply_batch(writer: StoreWriter, batch_df, position: BatchPosition, cache: CachePlan | None = None) -> BatchResult:
    """Apply one batch's DataFrame of Kafka records, the batch at `position`. `cache`: the
    batch's apply-cache plan (key-value, window and session stores; None reads every key). A record whose time is
    further ahead of the batch's clock (its write timestamp) than the batch's --max-future (the
    one it began under: position.batch_rules; `writer.max_future_ms` for a position without) is a
    dead letter `future` and moves no stream time (transforms.with_future_limit)."""
    return timed(
        writer.timer,
        "apply_batch",
        lambda: _apply_batch(writer, batch_df, position, cache if cacheable(writer.spec) else None),
    )


def cacheable(spec: StoreSpec) -> bool:
    """The apply cache holds current entries, of keys or of (key, window) pairs, and a key's
    sessions a batch can still touch (statestore.stream.session_cache): not versions. An
    aggregate store's entries too, their accumulators whole (aggregates.apply_aggregates and
    apply_window_aggregates, session_aggregates)."""
    return not spec.store_type.versioned


def is_aggregate(spec: StoreSpec) -> bool:
    """Whether the store keeps measures' accumulators (statestore.core.aggregation), not counts."""
    return spec.value_codec.startswith(AGGREGATE_FORMAT_PREFIX)


def on_driver_for(start: KafkaOffsets, end: KafkaOffsets, driver_records: int) -> bool:
    """Pure, the rule of where a batch is applied: by the driver when it reads at most
    `driver_records` Kafka records (known from its offsets, before anything runs), else by the
    executors. A small batch's apply is quicker than starting its Python tasks, and on the
    first batch after a restart quicker than starting Python workers at all."""
    if driver_records <= 0:
        return False
    records = checkpoint.records_between(start, end)
    return records is not None and records <= driver_records


def _apply_batch(writer: StoreWriter, batch_df, position: BatchPosition, cache: CachePlan | None) -> BatchResult:
    """Begun before any of the batch's writes, done after all of them (recording's rule)."""
    session = session_for(writer.config)
    max_future_ms = writer.max_future_ms if position.max_future_ms is None else position.max_future_ms
    batch_df = with_future_limit(batch_df, position.write_ts, max_future_ms)
    recording.begin(writer, session, position)
    stats, applied_on, letters = _count(writer, session, batch_df, position, cache)
    pause_driver_if_armed(position.batch_id)
    recording.done(writer, session, position, stats)
    result = BatchResult(
        batch_id=position.batch_id,
        stats=stats,
        dead_letters=sum(letters.values()),
        dead_letter_reasons=tuple(sorted(letters.items())),
        applied_on=applied_on,
    )
    if writer.seams.on_batch is not None:
        writer.seams.on_batch(result)
    return result


def _count(
    writer: StoreWriter, session, batch_df, position: BatchPosition, cache: CachePlan | None
) -> tuple[ApplyStats, str, Counter[str]]:
    """Apply the batch's counts; returns the apply's figures, where it ran (DRIVER or
    EXECUTORS) and the batch's dead letters by reason.

    One Spark job per batch: the apply job also counts what the batch cannot count, and only
    then (rarely) does the batch go to the dead-letter table, read from Kafka again (the same
    offsets give the same records). Versioned stores read the batch twice anyway (its largest
    record time first), so they keep it in memory in between."""
    spec = writer.spec
    versioned = spec.store_type.versioned
    if versioned:
        batch_df.persist()
    try:
        rows = None
        if writer.json_input is not None:
            parsed = _parsed_records(batch_df, writer.json_input)
            stats, applied_on = _aggregate(writer, parsed, position, cache)
            rows = json_input.dead_letter_rows(parsed)
            if spec.windowing is not None:  # late by their event time, not their Kafka time
                rows = rows.unionByName(_late_letter_rows(spec, parsed, position.stream_time_ms))
        else:
            applier = _applier(writer, batch_df, position, cache)
            stats, applied_on = _run(writer, batch_df, position, cache, applier)
        letters: Counter[str] = Counter()
        if stats.uncountable:
            # At the batch's timestamp, as its entries (a reset's floor shadows a paused writer's).
            options = {"write_ts": position.write_ts}
            if rows is not None:  # as the input stage judged them, with their reasons (and late ones)
                options["rows"] = rows
            if spec.windowing is not None:  # late records, by the stream time the batch began with
                options["stream_time_ms"] = position.stream_time_ms
            letters = writer.step(
                "dead letters",
                "writing dead letters",
                lambda: writer.seams.dead_letters(session, batch_df, spec, position.batch_id, **options),
            )
    finally:
        if versioned:
            batch_df.unpersist()
    return stats, applied_on, letters


def _parsed_records(batch_df, records):
    """The batch's records as the aggregate stage takes them: parsed from JSON
    (json_input.JsonInput), or mapped from a user's own query's columns (writer.OwnRecords)."""
    if isinstance(records, json_input.JsonInput):
        return json_input.parsed_records(batch_df, records)
    return records.parsed_records(batch_df)


def _late_letter_rows(spec: StoreSpec, parsed, stream_time_ms: int | None):
    """An aggregate window or session store's late records, by their event time."""
    if spec.store_type.sessioned:
        return session_aggregates.late_letter_rows(parsed, spec.windowing, stream_time_ms)
    return aggregates.late_letter_rows(parsed, spec.windowing, stream_time_ms)


def _aggregate(writer: StoreWriter, parsed, position: BatchPosition, cache: CachePlan | None) -> tuple[ApplyStats, str]:
    """Apply the batch's JSON records (`parsed`, json_input.parsed_records) to an aggregate
    store: each key's partials merged into its entry (a window store's: each key's and open
    window's, by the stream time the batch began with; a session store's: into the key's
    sessions, statestore.stream.session_aggregates), by the driver when the batch is small
    (on_driver_for, and its partials fit the driver's bound), else by the executors. `cache`:
    the batch's apply-cache plan (key-value and session stores: each partial then carries its
    bucket)."""
    spec, aggregate = writer.spec, writer.json_input.aggregate
    buckets = None if cache is None else cache.buckets
    # Windows and sessions after the stream time are known new while the stream is the store's
    # only writer, as the apply cache assumes (apply_windows, apply_sessions).
    after = position.stream_time_ms if writer.apply_cache else None
    if spec.store_type.sessioned:
        applier = session_aggregates.session_aggregate_applier(
            writer.config,
            spec,
            aggregate,
            position.batch_id,
            position.write_ts,
            timer=writer.seams.task_timer,
            stream_time_ms=after,
            cache=cache,
        )
        partials = session_aggregates.session_partials(
            parsed, writer.json_input, spec.windowing, position.stream_time_ms, buckets
        )
    else:
        applier = aggregates.aggregate_applier(
            writer.config,
            spec,
            aggregate,
            position.batch_id,
            position.write_ts,
            timer=writer.seams.task_timer,
            cutoff_ms=cutoff_ms(position.retention_ms, position.stream_time_ms),
            cache=cache,
            stream_time_ms=after,
        )
        if spec.windowing is not None:
            partials = aggregates.window_partials(
                parsed, writer.json_input, spec.windowing, position.stream_time_ms, buckets
            )
        else:
            partials = aggregates.partials(parsed, writer.json_input, buckets)
    if on_driver_for(position.start, position.end, writer.driver_records):
        small = collect_at_most(partials, DRIVER_ROWS)
        if small is not None:
            return aggregates.run_on_driver(small, applier), DRIVER
    return aggregates.run_on_executors(partials, applier), EXECUTORS


def _applier(writer: StoreWriter, batch_df, position: BatchPosition, cache: CachePlan | None):
    """The apply of the batch's deltas for the store's type (partition_applier's signature)."""
    config, spec, timer = writer.config, writer.spec, writer.seams.task_timer
    batch_id, write_ts = position.batch_id, position.write_ts
    # The store's retention at the batch's stream time: what readers hide, the apply takes as
    # absent (a drop-in applier without retention is given no cutoff).
    cutoff = cutoff_ms(position.retention_ms, position.stream_time_ms)
    retention = {} if cutoff is None else {"cutoff_ms": cutoff}
    if spec.store_type.versioned:
        # Every word's new version starts at the batch's largest record time, computed
        # once here so all executors (and any replay) agree on it.
        version_ms = batch_version_ms(batch_df)
        return writer.seams.make_applier(
            config, spec, batch_id, write_ts, version_ms=version_ms, timer=timer, **retention
        )
    # Windows and sessions after the stream time are known new while the stream is the store's
    # only writer, as the apply cache assumes (apply_windows, apply_sessions).
    after = position.stream_time_ms if writer.apply_cache else None
    if spec.store_type.sessioned:
        return session_applier(config, spec, batch_id, write_ts, timer=timer, stream_time_ms=after, cache=cache)
    if paned(spec):
        return pane_applier(config, spec, batch_id, write_ts, timer=timer, stream_time_ms=after, cache=cache)
    if spec.windowing is not None:
        return window_applier(config, spec, batch_id, write_ts, timer=timer, stream_time_ms=after, cache=cache)
    # Drop-in appliers (benchmarks) take the four arguments, plus timer and cache if used.
    extra = dict(retention) if timer is None else {"timer": timer, **retention}
    if cache is not None:
        extra["cache"] = cache
    return writer.seams.make_applier(config, spec, batch_id, write_ts, **extra)


def _run(
    writer: StoreWriter, batch_df, position: BatchPosition, cache: CachePlan | None, applier
) -> tuple[ApplyStats, str]:
    """Run `applier` over the batch's deltas: on the driver when the batch is small
    (on_driver_for, and _driver_deltas could collect it), else on the executors."""
    buckets = None if cache is None else cache.buckets
    stream_time = position.stream_time_ms
    small = None
    if on_driver_for(position.start, position.end, writer.driver_records):
        small = _driver_deltas(batch_df, writer.spec, buckets, stream_time)
    if small is not None:
        return apply_on_driver(small, applier), DRIVER
    deltas = _bucketed(_deltas(batch_df, writer.spec, stream_time), writer.spec, buckets)
    return run_applier(deltas, applier), EXECUTORS


def paned(spec: StoreSpec) -> bool:
    """Whether the store keeps its windows as panes (WindowSpec.panes): its batches write a row
    per key and pane (windowed.pane_deltas, apply_panes), not one per key and window."""
    return spec.store_type.windowed and spec.windowing.panes


def _deltas(batch_df, spec: StoreSpec, stream_time_ms: int | None):
    """The batch's deltas as the store's type counts them (a DataFrame plan)."""
    if spec.store_type.sessioned:
        return session_deltas(batch_df, spec.windowing, stream_time_ms)
    if paned(spec):
        return pane_deltas(batch_df, spec.windowing, stream_time_ms)
    if spec.windowing is not None:
        return windowed_deltas(batch_df, spec.windowing, stream_time_ms)
    return batch_deltas(batch_df, with_uncountable=True)


def _driver_deltas(batch_df, spec: StoreSpec, buckets: int | None, stream_time_ms: int | None):
    """A small batch's deltas on the driver, as a pyarrow Table, or None when it has too many
    rows for the driver (apply.DRIVER_ROWS). Key-value stores collect the batch's words and
    count them in Arrow instead of shuffling every word by key."""
    if spec.windowing is None:
        words = collect_at_most(word_times(batch_df, buckets), DRIVER_ROWS)
        return None if words is None else arrow_deltas(words)
    return collect_at_most(_bucketed(_deltas(batch_df, spec, stream_time_ms), spec, buckets), DRIVER_ROWS)


def _bucketed(deltas, spec: StoreSpec, buckets: int | None):
    """The deltas with their apply-cache buckets (None: no cache), hashed as the apply groups
    them: by word (and window), or a paned store's by word, pane and from."""
    return with_pane_buckets(deltas, buckets) if paned(spec) else with_buckets(deltas, buckets)
