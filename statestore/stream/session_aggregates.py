"""The aggregate stage of a session store: measures per key and session.

A session store keeps, per key, sessions of events no more than the gap apart
(statestore.stream.apply_sessions, the word count's replay-safe session apply). An aggregate
session store's session value is its measures' accumulators (AggregateSpec.pack) instead of an
event count: a merged session's are the merge of the sessions it joins and of the batch's
records within it (MeasureValues, the apply's fold).

Spark groups the batch's countable on-time records by key and event time (each time's partial
accumulators), then by key: one row per key, (key, records, time_ms, events[, bucket]), `events`
its (time_ms, m0, m1, ...) ascending. A record is late, as the word count's, when its event
time is more than the grace older than the stream time the batch began with
(SessionSpec.late, decided from the record alone so a replay decides the same); a time before
1970 is late too (no session holds it, as no window does). Late records and the records with
a reason are counted in one row of a null key (aggregates.applied: the batch's dead letters).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from statestore.core.aggregation import AggregateSpec
from statestore.core.config import CassandraConfig
from statestore.core.durations import format_duration
from statestore.core.model import SessionEntry, StoreSpec
from statestore.core.windows import SessionSpec
from statestore.store.book import deadletters
from statestore.stream.apply import Timer, sliced
from statestore.stream.apply_cache import CachePlan, bucket_expression
from statestore.stream.apply_sessions import Fold, KeyTimes, session_applier
from statestore.stream.json_input import KEY, REASON, TIME_MS, JsonInput, measure_columns
from statestore.stream.plan import Delta
from statestore.stream.windowed import session_on_time

RECORDS, EVENTS, BUCKET = "records", "events", "bucket"


class MeasureValues:
    """An aggregate session store's values: a session's measures are those of the stored
    sessions it merges and of the batch's records at the times within it."""

    def __init__(self, aggregate: AggregateSpec) -> None:
        self.aggregate = aggregate

    def fold_for(self, key_times: KeyTimes) -> Fold:
        spec, partials = self.aggregate, key_times.partials

        def fold(inside: Sequence[int], parts: Sequence[SessionEntry]) -> bytes:
            merged = spec.identity()
            for part in parts:
                merged = spec.merge(merged, spec.unpack(part.value))
            for t in inside:
                merged = spec.merge(merged, partials[t])
            return spec.pack(merged)

        return fold


def _on_time(sessions: SessionSpec, stream_time_ms: int | Column | None) -> Column:
    """A record's event time holds a session: on or after 1970, and no more than the grace
    older than the stream time (None, or a null column: every time is on time)."""
    return (F.col(TIME_MS) >= 0) & session_on_time(F.col(TIME_MS), sessions, stream_time_ms)


def session_partials(
    parsed, spec: JsonInput, sessions: SessionSpec, stream_time_ms: int | Column | None, buckets: int | None = None
):
    """(key, records, time_ms, events[, bucket]) per key of the batch's countable on-time records
    (a DataFrame plan): how many, their latest event time, and per distinct event time its
    records' partial accumulators, ascending. The records with a reason and the late ones are
    counted in one row of a null key. `buckets`: the apply cache's (None: off)."""
    counted = F.col(REASON).isNull() & _on_time(sessions, stream_time_ms)
    keyed = parsed.withColumn(KEY, F.when(counted, F.col(KEY)))
    columns = measure_columns(spec.aggregate)
    names = [f"m{i}" for i in range(len(spec.aggregate.measures))]
    measures = [
        F.expr(m.aggregation.partial_sql(columns[m.name])).alias(name)
        for m, name in zip(spec.aggregate.measures, names, strict=True)
    ]
    per_time = keyed.groupBy(KEY, TIME_MS).agg(F.count(F.lit(1)).alias(RECORDS), *measures)
    per_key = per_time.groupBy(KEY).agg(
        F.sum(RECORDS).alias(RECORDS),
        F.max(TIME_MS).alias(TIME_MS),
        F.array_sort(F.collect_list(F.struct(TIME_MS, *names))).alias(EVENTS),
    )
    if buckets is None:
        return per_key
    return per_key.withColumn(BUCKET, F.expr(bucket_expression(buckets, (KEY,))))


def late_letter_rows(parsed, sessions: SessionSpec, stream_time_ms: int | None):
    """The batch's late records as dead-letter rows (json_input.dead_letter_rows' columns),
    judged by their event time (TIME_MS), with the word count's detail and the event time."""
    late = parsed.filter(F.col(REASON).isNull() & ~_on_time(sessions, stream_time_ms))
    grace = format_duration(sessions.grace_ms) if sessions.grace_ms else "no grace"
    detail = F.when(
        F.col(TIME_MS) < 0, F.format_string("its event time %d ms is before 1970: no session holds it", F.col(TIME_MS))
    ).otherwise(
        F.format_string(
            f"more than the grace ({grace}) older than the stream time {stream_time_ms} ms: not counted in any "
            "session (its event time %d ms)",
            F.col(TIME_MS),
        )
    )
    columns = ("topic", "partition", "offset", "ts_ms")
    return late.select(*columns, F.lit(deadletters.LATE).alias(REASON), detail.alias("detail"), "raw")


def key_times_of(row: tuple, aggregate: AggregateSpec) -> KeyTimes:
    """Pure: one session_partials row as the session apply's KeyTimes (its distinct times and
    each time's accumulators). Arrow gives a struct as a dict of its fields: a measure's partial
    struct (latest's) is taken in field order, as aggregates.delta_of does."""
    kinds = [m.aggregation for m in aggregate.measures]
    partials = {}
    for event in row[3]:
        fields = list(event.values())
        partials[fields[0]] = tuple(
            kind.from_partial(tuple(value.values()) if isinstance(value, dict) else value)
            for kind, value in zip(kinds, fields[1:], strict=True)
        )
    bucket = row[4] if len(row) > 4 else None
    delta = Delta(row[0].encode("utf-8"), int(row[1]), row[2], bucket)
    return KeyTimes(delta, tuple(sorted(partials)), partials)


def key_times_slices(rows: Iterable[tuple], aggregate: AggregateSpec) -> Iterator[list[KeyTimes]]:
    """A task's session_partials rows as slices of KeyTimes (apply.sliced)."""
    return sliced(key_times_of(row, aggregate) for row in rows)


def session_aggregate_applier(
    config: CassandraConfig,
    spec: StoreSpec,
    aggregate: AggregateSpec,
    batch_id: int,
    write_ts: int,
    timer: Timer | None = None,
    stream_time_ms: int | None = None,
    cache: CachePlan | None = None,
):
    """apply_sessions.session_applier over session_partials' rows, a session's value the
    measures (MeasureValues): the word count's reads, replay rule, retries and apply cache."""
    return session_applier(
        config,
        spec,
        batch_id,
        write_ts,
        timer=timer,
        stream_time_ms=stream_time_ms,
        cache=cache,
        values=MeasureValues(aggregate),
        slices=lambda rows: key_times_slices(rows, aggregate),
    )
