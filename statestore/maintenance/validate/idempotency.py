"""Idempotency validation of a word-count store: recompute, replay, data-quality suite.

- Recompute: read the input topic in batch up to the offsets the stream has committed (the
  registry's position), tokenize and count with the stream's own functions
  (statestore.stream.job.batch_deltas over statestore.stream.tokenize.words_column), and compare with
  the store key by key (selection.judge_count; expiry's recorded cutoff loosens the check only
  for keys with input older than it). Window and session stores are recounted per window or
  session (statestore.maintenance.validate.recount_windows) and compared window by window.
  An aggregate store (JSON records, statestore.core.aggregation) is recomputed with the stream's
  own input and aggregate stages and the input settings its registry records, and compared
  measure by measure (statestore.maintenance.validate.recount_aggregates); a window aggregate
  store per key and window, each record counted in the windows open at the stream time of its
  late letter (recount_window_aggregates_of); a session aggregate store per key and session, each
  key's on-time records merged by the gap (recount_session_aggregates_of).
- Replay: statestore.maintenance.validate.replay re-applies the last N batches to a shadow copy
  (key-value word-count stores).
- Quality: statestore.maintenance.validate.quality runs a Great Expectations suite with Data Docs.

The store must hold still while it is read: the registry's position is read before and after
the snapshot, and a batch applied in between means another attempt (then StoreChangedError).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from statestore.core.aggregation import AGGREGATE_FORMAT_PREFIX
from statestore.core.codecs import millis_of
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.errors import StoreChangedError, UnsupportedOperationError
from statestore.core.retention import cutoff_ms
from statestore.maintenance.shared import selection
from statestore.maintenance.shared.scan import default_ranges, shape_of, store_frame
from statestore.maintenance.validate import quality, recount_aggregates, replay
from statestore.maintenance.validate import recount_windows as validate_timed
from statestore.maintenance.validate.recount import Recount, input_records, without_future_letters
from statestore.store.book import history, registry
from statestore.store.book.deadletters import LATE
from statestore.store.book.registry import StoreProgress
from statestore.stream import aggregates
from statestore.stream.batches import stored_json_input
from statestore.stream.json_input import KEY, REASON, TIME_MS, JsonInput, parsed_records
from statestore.stream.transforms import batch_deltas

_log = logging.getLogger("statestore.maintenance.validate.idempotency")
DIFFERENCES_FILE = "validate_idempotency_differences.jsonl"


@dataclass(frozen=True)
class ValidateOptions:
    starting_offsets: str = "earliest"
    checkpoint: str | None = None
    replay_batches: int = 3
    listed: int = 20
    token_ranges: int | None = None
    quality: bool = True
    attempts: int = 3


@dataclass
class Difference:
    key: str
    kind: str  # missing | unexpected | count | time | changed-by-replay; aggregate stores: measure | unreadable
    stored: Any  # the count (aggregate stores: the measure's result, or the entry's results)
    expected: Any
    expected_at_least: int | None = None
    stored_time_ms: int | None = None
    expected_time_ms: int | None = None
    window_start: int | None = None  # window and session stores: the key's window or session
    window_end: int | None = None
    measure: str | None = None  # aggregate stores: the measure that differs (kind measure)


@dataclass
class RecomputeResult:
    passed: bool
    topics: list[str]
    starting_offsets: str
    ending_offsets: str | None
    last_batch_id: int | None
    expired_before_ms: int | None
    input_words: int
    words_at_least: int
    input_keys: int
    store_entries: int
    store_sum: int | None  # the sum of the store's counts (None: an aggregate store)
    differences: int
    first_differences: list[Difference] = field(default_factory=list)
    differences_file: str | None = None
    seconds: float = 0.0
    counted_per: str = "key"  # what one entry counts: key, window or session
    # Aggregate stores: each measure and how it was compared (recount_aggregates.measures_checked),
    # the records the input stage could not count (dead letters), and the keys not compared
    # because expiry may have restarted them.
    measures: list[dict] = field(default_factory=list)
    uncountable: int | None = None
    not_compared: int = 0


def _same_position(a: StoreProgress, b: StoreProgress) -> bool:
    return (a.last_batch_id, a.pending_batch_id, a.offsets) == (b.last_batch_id, b.pending_batch_id, b.offsets)


def snapshot(spark, session, config: CassandraConfig, spec, shape, options: ValidateOptions, raw_values=False):
    """The store as a persisted DataFrame and the position it reflects (with `raw_values`, each
    value as its bytes); retried while the stream applies batches meanwhile."""
    ranges = options.token_ranges or default_ranges(spark)
    for attempt in range(1, options.attempts + 1):
        before = registry.progress(session, spec.keyspace, spec.name)
        pending = before.pending_batch_id
        if pending is not None and (before.last_batch_id is None or pending > before.last_batch_id):
            problem = f"batch {pending} is being applied (or was left half-applied by a crash)"
        else:
            frame = store_frame(spark, config, shape, ranges, raw_values=raw_values).persist()
            frame.count()
            after = registry.progress(session, spec.keyspace, spec.name)
            if _same_position(before, after):
                return frame, before
            frame.unpersist()
            problem = f"the stream applied batch {after.last_batch_id} while the store was read"
        _log.warning("store %s: %s (attempt %d of %d)", spec.name, problem, attempt, options.attempts)
        time.sleep(min(5.0 * attempt, 15.0))
    raise StoreChangedError(
        f"store '{spec.name}' kept changing while it was validated: {problem}. Validate while the stream "
        "is stopped or idle (after an available-now run, or between triggers); a crashed batch is finished by "
        "restarting the stream."
    )


def expected_counts(spark, records, expired_before_ms):
    """(key, total, last_ms, recent) recounted from `records`, the topic up to the store's position."""

    if records is None:
        return None
    totals = batch_deltas(records).select(F.col("word").alias("key"), F.col("delta").alias("total"), "last_ms")
    if expired_before_ms is None:
        return totals.withColumn("recent", F.col("total"))
    since = records.filter(F.unix_millis("timestamp") >= F.lit(expired_before_ms))
    recent = batch_deltas(since).select(F.col("word").alias("key"), F.col("delta").alias("recent"))
    return totals.join(recent, "key", "left").fillna(0, ["recent"])


def differences_of(joined, expiry_applies: bool, bounds=None):
    """The RDD of Differences of a joined (coordinates..., value, time, total, last_ms, recent)
    frame; `bounds` names each row's window (window and session stores)."""

    def judge(rows):
        for r in rows:
            kind = selection.judge_count(r.value, r.time, r.total, r.last_ms, r.recent, expiry_applies)
            if kind is not None:
                at_least = r.recent if expiry_applies else r.total
                window = bounds(r) if bounds is not None else (None, None)
                yield Difference(r.key, kind, r.value, r.total, at_least, r.time, r.last_ms, *window)

    return joined.rdd.mapPartitions(judge)


def _empty_expected(spark, coordinates: tuple[str, ...]):
    fields = [T.StructField(c, T.StringType() if c == "key" else T.LongType()) for c in coordinates]
    fields += [T.StructField(name, T.LongType()) for name in ("total", "last_ms", "recent")]
    return spark.createDataFrame([], T.StructType(fields))


def recompute(
    spark, frame, recount: Recount, progress: StoreProgress, expired_before_ms, options, report_dir: Path
) -> RecomputeResult:
    """Compare the store's entries (`frame`) with the recount of its input, entry by entry."""

    began = time.monotonic()
    coordinates = list(recount.coordinates)
    expected = recount.expected if recount.expected is not None else _empty_expected(spark, recount.coordinates)
    expected = expected.persist()
    joined = frame.select(*coordinates, "value", "time").join(expected, coordinates, "full_outer")
    diffs = differences_of(joined, expired_before_ms is not None, recount.bounds).persist()
    try:
        count, first, path = _listed(diffs, options, report_dir)
        sums = expected.agg(F.sum("total"), F.sum("recent"), F.count("*")).first()
        store_sum = frame.agg(F.sum("value"), F.count("*")).first()
    finally:
        diffs.unpersist()
        expected.unpersist()
    return RecomputeResult(
        **_compared_over(progress, options, expired_before_ms),
        passed=count == 0,
        input_words=int(sums[0] or 0),
        words_at_least=int(sums[1] or 0),
        input_keys=int(sums[2]),
        store_entries=int(store_sum[1]),
        store_sum=int(store_sum[0] or 0),
        differences=count,
        first_differences=first,
        differences_file=path.name,
        seconds=round(time.monotonic() - began, 2),
        counted_per=recount.counted_per,
    )


def _listed(diffs, options: ValidateOptions, report_dir: Path) -> tuple[int, list[Difference], Path]:
    """How many differences `diffs` (an RDD) holds, the first `options.listed` of them, and the
    file every one of them is written to (streamed: the differences only, never the table)."""
    count = diffs.count()
    path = report_dir / DIFFERENCES_FILE
    report_dir.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        for difference in diffs.toLocalIterator() if count else ():
            out.write(json.dumps(vars(difference)) + "\n")
    first = (
        diffs.takeOrdered(options.listed, key=lambda d: (d.key, d.window_start or 0, d.measure or "")) if count else []
    )
    return count, first, path


_KAFKA_ROWS = (
    "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, timestampType int"
)


def recount_aggregates_of(spark, records, stage: JsonInput, cutoff: int | None):
    """(key, records, time_ms, m0, m1, ..., first_ms) per key of the input `records` (None: no
    batch applied, no input), by the stream's own stages over every record at once; the
    records the input stage could not count are the row with a null key."""
    if records is None:
        records = spark.createDataFrame([], _KAFKA_ROWS)
    parsed = parsed_records(records, stage)
    partials = aggregates.partials(parsed, stage)
    if cutoff is None:
        return partials.withColumn("first_ms", F.lit(None).cast("long"))
    firsts = parsed.filter(F.col(REASON).isNull()).groupBy(KEY).agg(F.min(TIME_MS).alias("first_ms"))
    return partials.join(firsts, KEY, "left")


def recount_window_aggregates_of(spark, session, spec, records, stage: JsonInput, progress: StoreProgress):
    """(key, records, time_ms, m0, m1, ..., window_start, first_ms) per key and window of the
    input `records` (None: no input), by the stream's own window stage
    (statestore.stream.aggregates.window_partials) over every record at once: each record counts
    in the windows of its event time open at the stream time of its late letter (the one that
    judged it when the stream found it late; none: on time, every window open), as the stream's
    batch decided (recount_windows.late_records; a letter from before letters kept their stream
    time counts as every window closed). Windows past the retention at the store's stream time
    now are left out, as the store's reads leave them out. The records the input stage could not
    count (and the late ones) are the rows with a null key."""
    if records is None:
        records = spark.createDataFrame([], _KAFKA_ROWS)
    parsed = parsed_records(records, stage)
    late = F.broadcast(validate_timed.late_records(spark, session, spec))
    judged = parsed.join(late, ["topic", "partition", "offset"], "left")
    partials = aggregates.window_partials(judged, stage, spec.windowing, F.col("late_at_ms"))
    now = None if progress.max_event_time is None else millis_of(progress.max_event_time)
    if now is not None:
        retained = F.col(aggregates.WINDOW_START) > F.lit(now - spec.windowing.retention_ms)
        partials = partials.filter(F.col(KEY).isNull() | retained)
    return partials.withColumn("first_ms", F.lit(None).cast("long"))


SESSION_START, SESSION_END = "session_start", "session_end"
_SESSION = "_session"  # the recount's grouping key: the record's key and session, one struct


def recount_session_aggregates_of(spark, session, spec, records, stage: JsonInput, progress: StoreProgress):
    """(key, records, time_ms, m0, m1, ..., session_start, session_end, first_ms) per key and
    session of the input `records` (None: no input), by the stream's own stages over every record
    at once: a countable record is late when a late letter judged it so (its event time plus the
    grace before the stream time its batch began with, SessionSpec.late; a letter from before
    letters kept their stream time: late) or its time is before 1970, and counts nowhere; each
    key's other records are merged into sessions by the gap (recount_windows.sessions_with_counts,
    merge_into_sessions' rule) and each session's partials are its records' (aggregates.partials,
    grouped per key and session).
    Sessions ended past the retention at the store's stream time now are left out, as the store's
    reads leave them out. The records the input stage could not count (and the late ones) are the
    row with a null key."""
    if records is None:
        records = spark.createDataFrame([], _KAFKA_ROWS)
    sessions = spec.windowing
    parsed = parsed_records(records, stage)
    late_at = F.broadcast(validate_timed.late_records(spark, session, spec))
    judged = parsed.join(late_at, ["topic", "partition", "offset"], "left")
    judged_late = F.col("late_at_ms").isNotNull() & (F.col(TIME_MS) + F.lit(sessions.grace_ms) < F.col("late_at_ms"))
    late = judged_late | (F.col(TIME_MS) < 0)  # before 1970: no session holds it (a late letter too)
    marked = judged.withColumn(REASON, F.when(F.col(REASON).isNull() & late, F.lit(LATE)).otherwise(F.col(REASON)))
    counted = marked.filter(F.col(REASON).isNull())
    gap = sessions.gap_ms

    def split(rows):
        for r in rows:
            for start, end, _ in validate_timed.sessions_with_counts(r.times, gap):
                yield r[KEY], start, end

    times = counted.groupBy(KEY).agg(F.collect_list(TIME_MS).alias("times"))
    bounds = spark.createDataFrame(times.rdd.mapPartitions(split), "_k string, _s long, _e long")
    inside = (F.col(KEY) == F.col("_k")) & F.col(TIME_MS).between(F.col("_s"), F.col("_e"))
    located = marked.join(bounds, inside, "left")
    tagged = located.withColumn(KEY, F.struct(F.col(KEY).alias("k"), F.col("_s").alias("s"), F.col("_e").alias("e")))
    measures = [f"m{i}" for i in range(len(stage.aggregate.measures))]
    partials = aggregates.partials(tagged, stage).select(
        F.col(f"{KEY}.k").alias(KEY),
        aggregates.RECORDS,
        TIME_MS,
        *measures,
        F.col(f"{KEY}.s").alias(SESSION_START),
        F.col(f"{KEY}.e").alias(SESSION_END),
    )
    now = None if progress.max_event_time is None else millis_of(progress.max_event_time)
    if now is not None:
        retained = F.col(SESSION_END) > F.lit(now - sessions.retention_ms)
        partials = partials.filter(F.col(KEY).isNull() | retained)
    return partials.withColumn("first_ms", F.lit(None).cast("long"))


def _window_recount(spark, session, spec, records, stage: JsonInput, progress: StoreProgress) -> Recount:
    """The per-window recount of a window aggregate store, as Recount's coordinates and bounds."""
    size = spec.windowing.size_ms
    expected = recount_window_aggregates_of(spark, session, spec, records, stage, progress)
    return Recount(
        expected, ("key", aggregates.WINDOW_START), "window", lambda r: (r.window_start, r.window_start + size)
    )


def _session_recount(spark, session, spec, records, stage: JsonInput, progress: StoreProgress) -> Recount:
    """The per-session recount of a session aggregate store, as Recount's coordinates and bounds."""
    expected = recount_session_aggregates_of(spark, session, spec, records, stage, progress)
    return Recount(expected, ("key", SESSION_START, SESSION_END), "session", lambda r: (r.session_start, r.session_end))


def recompute_aggregates(
    spark,
    frame,
    stage: JsonInput,
    records,
    progress: StoreProgress,
    expired_before_ms,
    options,
    report_dir: Path,
    timed: Recount | None = None,
) -> RecomputeResult:
    """Compare an aggregate store's entries (`frame`, values as bytes) with the recount of its
    input, key by key and measure by measure (recount_aggregates.judge_entry). A window or
    session store's (`timed`: _window_recount's or _session_recount's): by key and window, or
    key and session."""
    began = time.monotonic()
    aggregate = stage.aggregate
    measures = [f"m{i}" for i in range(len(aggregate.measures))]
    cutoff = expired_before_ms
    recount = (timed.expected if timed is not None else recount_aggregates_of(spark, records, stage, cutoff)).persist()
    coordinates = ["key"] if timed is None else list(timed.coordinates)
    bounds = None if timed is None else timed.bounds

    def judge(rows):
        for r in rows:
            expected = None
            if r.records is not None:
                partial = (r.key, r.records, r.time_ms, *(r[m] for m in measures))
                expected = aggregates.delta_of(partial, aggregate).accumulators
            value = None if r.value is None else bytes(r.value)
            window = (None, None) if bounds is None else bounds(r)
            for f in recount_aggregates.judge_entry(aggregate, value, r.time, expected, r.time_ms, r.first_ms, cutoff):
                yield Difference(
                    r.key, f.kind, f.stored, f.expected, None, r.time, r.time_ms, *window, measure=f.measure
                )

    counted = recount.filter(F.col(KEY).isNotNull())
    joined = frame.select(*coordinates, "value", "time").join(counted, coordinates, "full_outer")
    diffs = joined.rdd.mapPartitions(judge).persist()
    try:
        count, first, path = _listed(diffs, options, report_dir)
        figures = recount.agg(
            F.sum(F.when(F.col(KEY).isNotNull(), F.col(aggregates.RECORDS))),
            F.sum(F.when(F.col(KEY).isNull(), F.col(aggregates.RECORDS))),
            F.count(KEY),
        ).first()
        if timed is not None and timed.counted_per == "window":  # a record counts in each of its windows
            figures = (input_records_of(records, stage), figures[1], figures[2])  # the input's records, once each
        not_compared = 0
        if cutoff is not None:
            both = F.col("value").isNotNull() & F.col(aggregates.RECORDS).isNotNull()
            not_compared = joined.filter(both & (F.col("first_ms") < F.lit(cutoff))).count()
        entries = frame.count()
    finally:
        diffs.unpersist()
        recount.unpersist()
    return RecomputeResult(
        **_compared_over(progress, options, expired_before_ms),
        passed=count == 0,
        input_words=int(figures[0] or 0),
        words_at_least=int(figures[0] or 0),
        input_keys=int(figures[2]),
        store_entries=int(entries),
        store_sum=None,
        differences=count,
        first_differences=first,
        differences_file=path.name,
        seconds=round(time.monotonic() - began, 2),
        measures=recount_aggregates.measures_checked(aggregate),
        uncountable=int(figures[1] or 0),
        not_compared=not_compared,
        counted_per="key" if timed is None else timed.counted_per,
    )


def input_records_of(records, stage: JsonInput) -> int:
    """How many of the input `records` the input stage counts (no dead-letter reason)."""
    if records is None:
        return 0
    return parsed_records(records, stage).filter(F.col(REASON).isNull()).count()


def aggregate_entries(frame, stage: JsonInput, timed: Recount | None = None):
    """The store's entries as the Great Expectations suite reads an aggregate store: key,
    batch_id, time and `problems` (recount_aggregates.entry_problems, None when sound); a window
    or session store's (`timed`: its recount's coordinates and bounds) with window_start, or
    session_start and session_end, after the key, each problem naming the window or session."""
    aggregate = stage.aggregate
    spans = () if timed is None else timed.coordinates[1:]
    bounds = None if timed is None else timed.bounds  # not `timed` in the closure: it holds a DataFrame

    def rows(entries):
        for r in entries:
            found = recount_aggregates.entry_problems(aggregate, None if r.value is None else bytes(r.value))
            where = f"{r.key!r}" if bounds is None else "{!r} [{}, {}]".format(r.key, *bounds(r))
            problems = None if found is None else f"{where}: {found}"
            yield (r.key, *(r[c] for c in spans), r.batch_id, r.time, problems)

    schema = ", ".join(["key string", *(f"{c} long" for c in spans), "batch_id long, time long, problems string"])
    return frame.select("key", *spans, "value", "batch_id", "time").rdd.mapPartitions(rows).toDF(schema)


@dataclass
class ValidationReport:
    keyspace: str
    store: str
    generated_at: str
    status: str
    recompute: RecomputeResult
    replay: object | None
    quality: object | None
    replay_not_run: str = "no --checkpoint given, or --replay-batches 0"

    def failure_message(self) -> str:
        parts = []
        if not self.recompute.passed:
            shown = ", ".join(_show(d) for d in self.recompute.first_differences[:10])
            parts.append(f"{self.recompute.differences} key(s) differ from the recount of the input: {shown}")
        if self.replay is not None and not self.replay.passed:
            parts.append(self.replay.summary)
        if self.quality is not None and not self.quality.passed:
            failed = [e["expectation"] for e in self.quality.expectations if not e["success"]]
            parts.append("Great Expectations failed: " + ", ".join(failed))
        return f"store '{self.store}' failed validation: " + "; ".join(parts)


def _show(d: Difference) -> str:
    window = "" if d.window_start is None else f" in [{d.window_start}, {d.window_end}]"
    if d.measure is not None:
        return f"'{d.key}'{window} (measure {d.measure}: store {d.stored}, input {d.expected})"
    expected = d.expected if d.expected_at_least in (None, d.expected) else f"{d.expected_at_least}..{d.expected}"
    return f"'{d.key}'{window} ({d.kind}: store {d.stored}, input {expected})"


def latest_cutoff(session, spec) -> int | None:
    """The latest time before which the store may have forgotten a key, so that it counts anew:
    the expire job's last recorded cutoff, or the store's retention at its stream time now (the
    stream counts a key past it from zero, statestore.core.retention), whichever is later."""
    recorded = history.expired_before(session, spec.keyspace, spec.name)
    moment = registry.progress(session, spec.keyspace, spec.name).max_event_time
    at_read = cutoff_ms(spec.retention_ms, None if moment is None else millis_of(moment))
    return max((c for c in (recorded, at_read) if c is not None), default=None)


def _aggregate_stage(session, spec) -> JsonInput | None:
    """The input stage an aggregate store's registry records (None: not an aggregate store);
    UnsupportedOperationError for one whose input cannot be recomputed."""
    if not spec.value_codec.startswith(AGGREGATE_FORMAT_PREFIX):
        return None
    if spec.store_type.versioned:
        raise UnsupportedOperationError(
            f"store '{spec.name}': aggregations on {spec.store_type.value} stores are not validated (key-value, "
            "window and session stores are)"
        )
    settings = registry.input_settings(session, spec.keyspace, spec.name)
    if settings is not None and not settings.recomputable:
        raise UnsupportedOperationError(
            f"store '{spec.name}' is fed by records of input format {settings.format} (a user's own query, not "
            "JSON records of its topic): validation recomputes JSON records only"
        )
    stage = stored_json_input(spec.value_codec, settings)
    if stage is None:
        raise UnsupportedOperationError(
            f"store '{spec.name}' keeps measures but records no JSON input settings (how its records are keyed "
            "and timed), so its input cannot be recomputed: run its stream job once (it records them), then validate"
        )
    return stage


def validate(
    spark, session, config: CassandraConfig, kafka: KafkaConfig, store: str, options: ValidateOptions, report_dir: Path
) -> ValidationReport:

    spec = registry.lookup(session, config.keyspace, store)
    stage = _aggregate_stage(session, spec)
    if stage is None and (spec.store_type.versioned or (spec.key_codec, spec.value_codec) != ("string", "long")):
        raise UnsupportedOperationError(
            f"store '{store}' is not a word-count store (string keys, long values) nor an aggregate store: "
            "validation recomputes a store from its input, so it applies to word-count stores of type "
            "partitioned-kv, global-kv, partitioned-window and partitioned-session, and to aggregate stores"
        )
    timed = spec.store_type.timed
    history.ensure_table(session, spec.keyspace)
    run_at = history.now()
    shape = shape_of(session, spec)
    expired_before_ms = None if timed else latest_cutoff(session, spec)
    frame, progress = snapshot(spark, session, config, spec, shape, options, raw_values=stage is not None)
    try:
        records = input_records(spark, kafka, progress, options.starting_offsets)
        records = without_future_letters(spark, session, spec, records)
        replayed = checked = None
        if stage is not None:
            per, unique, seen = None, ("key",), frame
            if timed:  # per key and window (aggregates.window_partials' rules) or key and session
                recount_of = _session_recount if spec.store_type.sessioned else _window_recount
                per = recount_of(spark, session, spec, records, stage, progress)
                unique, seen = per.coordinates, validate_timed.visible(frame, spec.windowing, progress)
            result = recompute_aggregates(
                spark, seen, stage, records, progress, expired_before_ms, options, report_dir, per
            )
            if options.quality:
                entries = aggregate_entries(seen, stage, per)
                checked = quality.run_suite(
                    spark, entries, spec, progress, result, report_dir, unique, aggregate=stage.aggregate
                )
        else:
            if timed:
                seen = validate_timed.visible(frame, spec.windowing, progress)
                recount = validate_timed.recount(spark, session, spec, records, progress)
            else:
                seen = frame
                recount = Recount(expected_counts(spark, records, expired_before_ms))
            result = recompute(spark, seen, recount, progress, expired_before_ms, options, report_dir)
            if options.replay_batches and options.checkpoint and not timed:
                replayed_store = replay.ReplayedStore(spec, shape, progress, expired_before_ms)
                replayed = replay.replay_check(spark, session, config, kafka, replayed_store, options)
            if options.quality:
                checked = quality.run_suite(spark, seen, spec, progress, result, report_dir, recount.coordinates)
    finally:
        frame.unpersist()
    passed = result.passed and (replayed is None or replayed.passed) and (checked is None or checked.passed)
    report = ValidationReport(
        keyspace=spec.keyspace,
        store=spec.name,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        status="pass" if passed else "fail",
        recompute=result,
        replay=replayed,
        quality=checked,
    )
    if timed:
        report.replay_not_run = (
            "replays re-apply key-value batches only; the recount checks every window or session entry exactly"
        )
    if stage is not None and not timed:
        report.replay_not_run = (
            "replays re-apply word-count batches only; the recompute checks every aggregate entry, measure by measure"
        )
    summary = {"status": report.status, "differences": result.differences, "last_batch_id": progress.last_batch_id}
    history.record(session, spec.keyspace, spec.name, history.VALIDATE, run_at, report.status, None, summary)
    return report


def _compared_over(progress: StoreProgress, options: ValidateOptions, expired_before_ms: int | None) -> dict:
    """What every recompute's result says of the input it read: the topics and offsets, up to
    the store's last batch, and the expiry cutoff that loosened the check."""
    return {
        "topics": sorted(json.loads(progress.offsets)) if progress.offsets else [],
        "starting_offsets": options.starting_offsets,
        "ending_offsets": progress.offsets,
        "last_batch_id": progress.last_batch_id,
        "expired_before_ms": expired_before_ms,
    }
