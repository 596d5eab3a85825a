"""Recounts of window and session stores from their input, for statestore.maintenance.validate.idempotency.

A windowed word count decides per batch what is late, by the stream time the batch started
with; Kafka alone cannot tell where batches began. The dead letters can: every late record is
one, with the stream time that judged it (`stream_time`). So the recount gives each record
of the input the stream time of its late letter (none: on time, every window open) and counts
with the stream's own functions (statestore.stream.windowed) in one pass over the whole input:

- windows: each word in every window of its record that was open at that stream time;
- sessions: each key's on-time event times, merged by the gap (statestore.core.windows).

Entries past the retention at the store's current stream time are left out on both sides,
as the store's reads leave them out. A replayed or half-applied batch that counted twice, or
a late record that was counted anyway, shows as a window or session whose count differs.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import replace

from pyspark.sql import functions as F

from statestore.core.codecs import millis_of
from statestore.core.windows import SessionSpec, WindowSpec, merge_into_sessions
from statestore.maintenance.validate.recount import Recount
from statestore.store.book import deadletters
from statestore.store.book.registry import StoreProgress
from statestore.stream.apply import UNCOUNTABLE
from statestore.stream.windowed import session_deltas, windowed_deltas

# A late letter written before letters recorded their stream time: every window of its record
# counts as closed (exact for tumbling windows and sessions, where a late record counts nowhere).
_ALL_CLOSED_MS = 1 << 62
_LATE_SCHEMA = "topic string, partition int, offset long, late_at_ms long"
_SESSION_SCHEMA = "key string, session_start long, session_end long, total long, last_ms long, recent long"


def _now(progress: StoreProgress) -> int | None:
    return None if progress.max_event_time is None else millis_of(progress.max_event_time)


def visible(frame, windowing: WindowSpec | SessionSpec, progress: StoreProgress):
    """The store's entries its reads return (a paned store's windows composed from its panes:
    windows_of), those not past the retention at its stream time."""
    if isinstance(windowing, WindowSpec) and windowing.panes:
        frame = windows_of(frame, windowing)
    now = _now(progress)
    if now is None:
        return frame
    column = "session_end" if isinstance(windowing, SessionSpec) else "window_start"
    return frame.filter(F.col(column) > F.lit(now - windowing.retention_ms))


def _at_or_after_hop(time_ms, hop: int):
    """The first multiple of `hop` at or after `time_ms` (0 at least): WindowSpec's rule in Spark SQL."""
    positive = F.greatest(time_ms, F.lit(0).cast("bigint"))
    return positive + F.pmod(-positive, F.lit(hop).cast("bigint"))


def windows_of(panes, windowing: WindowSpec):
    """A paned store's rows (partition, key, pane_start, from_start, value, batch_id, time) as the
    windows its reads return (partition, segment, key, window_start, value, batch_id, time): each
    row counted in WindowSpec.windows_of_row's windows, a window the sum of its rows' values,
    the latest batch and time among them (statestore.core.windows.compose_windows in Spark SQL)."""
    hop, size, pane = windowing.hop_ms, windowing.size_ms, windowing.pane_ms
    first = F.greatest(
        _at_or_after_hop(F.col("from_start"), hop), _at_or_after_hop(F.col("pane_start") - F.lit(size - pane), hop)
    )
    last = F.col("pane_start") - F.pmod(F.col("pane_start"), F.lit(hop).cast("bigint"))
    starts = F.when(first <= last, F.sequence(first, last, F.lit(hop).cast("bigint"))).otherwise(
        F.array().cast("array<bigint>")
    )
    windows = panes.select("partition", "key", F.explode(starts).alias("window_start"), "value", "batch_id", "time")
    return (
        windows.groupBy("partition", "key", "window_start")
        .agg(F.sum("value").alias("value"), F.max("batch_id").alias("batch_id"), F.max("time").alias("time"))
        .withColumn("segment", F.floor(F.col("window_start") / F.lit(windowing.segment_ms)).cast("bigint"))
    )


def late_records(spark, session, spec):
    """(topic, partition, offset, late_at_ms) of every record the stream found late."""
    rows = [
        (d.topic, d.kafka_partition, d.kafka_offset, _ALL_CLOSED_MS if d.stream_time_ms is None else d.stream_time_ms)
        for d in deadletters.read_all(session, spec.keyspace, spec.name)
        if d.reason == deadletters.LATE
    ]
    return spark.createDataFrame(rows, _LATE_SCHEMA)


def recount(spark, session, spec, records, progress: StoreProgress) -> Recount:
    """The recount of `records` (the input up to the store's position; None: no batch yet)."""
    windowing = spec.windowing
    sessions = isinstance(windowing, SessionSpec)
    if sessions:
        shape = ("key", "session_start", "session_end")
        recounted = Recount(None, shape, "session", lambda r: (r.session_start, r.session_end))
    else:
        size = windowing.size_ms
        recounted = Recount(None, ("key", "window_start"), "window", lambda r: (r.window_start, r.window_start + size))
    if records is None:
        return recounted
    judged = records.join(F.broadcast(late_records(spark, session, spec)), ["topic", "partition", "offset"], "left")
    now = _now(progress)
    late_at = F.col("late_at_ms")
    if sessions:
        expected = _sessions(spark, session_deltas(judged, windowing, late_at), windowing, now)
    else:
        per_window = replace(windowing, panes=False)  # counted per window, as the store's reads return them
        expected = _windows(windowed_deltas(judged, per_window, late_at), windowing, now)
    return Recount(expected, recounted.coordinates, recounted.counted_per, recounted.bounds)


def _windows(deltas, windowing: WindowSpec, now: int | None):
    counted = deltas.filter(F.col("word") != F.lit(UNCOUNTABLE))
    if now is not None:
        counted = counted.filter(F.col("window_start") > F.lit(now - windowing.retention_ms))
    return counted.select(
        F.col("word").alias("key"),
        "window_start",
        F.col("delta").alias("total"),
        "last_ms",
        F.col("delta").alias("recent"),
    )


def sessions_with_counts(times: list[int], gap_ms: int) -> list[tuple[int, int, int]]:
    """(start, end, events) of the sessions one key's event times make. Pure."""
    ordered = sorted(times)
    sessions, _ = merge_into_sessions([], ordered, gap_ms)
    return [
        (s.start_ms, s.end_ms, bisect_right(ordered, s.end_ms) - bisect_right(ordered, s.start_ms - 1))
        for s in sessions
    ]


def _sessions(spark, deltas, sessions: SessionSpec, now: int | None):
    gap = sessions.gap_ms
    horizon = None if now is None else now - sessions.retention_ms

    def split(rows):
        for r in rows:
            for start, end, events in sessions_with_counts(r.times, gap):
                if horizon is None or end > horizon:
                    yield (r.word, start, end, events, end, events)

    counted = deltas.filter(F.col("word") != F.lit(UNCOUNTABLE))
    return spark.createDataFrame(counted.rdd.mapPartitions(split), _SESSION_SCHEMA)
