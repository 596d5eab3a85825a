"""Idempotency validation of a word-count store: recompute, replay, data-quality suite.

- Recompute: read the input topic in batch up to the offsets the stream has committed (the
  registry's position), tokenize and count with the stream's own functions
  (statestore.stream.job.batch_deltas over statestore.stream.tokenize.words_column), and compare with
  the store key by key (selection.judge_count; expiry's recorded cutoff loosens the check only
  for keys with input older than it). Window and session stores are recounted per window or
  session (statestore.maintenance.validate.recount_windows) and compared window by window.
- Replay: statestore.maintenance.validate.replay re-applies the last N batches to a shadow copy
  (key-value stores).
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

from pyspark.sql import functions as F
from pyspark.sql import types as T

from statestore.core.codecs import millis_of
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.errors import StoreChangedError, UnsupportedOperationError
from statestore.core.retention import cutoff_ms
from statestore.maintenance.shared import selection
from statestore.maintenance.shared.scan import default_ranges, shape_of, store_frame
from statestore.maintenance.validate import quality, replay
from statestore.maintenance.validate import recount_windows as validate_timed
from statestore.maintenance.validate.recount import Recount, input_records, without_future_letters
from statestore.store.book import history, registry
from statestore.store.book.registry import StoreProgress
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
    kind: str  # missing | unexpected | count | time | changed-by-replay
    stored: int | None
    expected: int | None
    expected_at_least: int | None = None
    stored_time_ms: int | None = None
    expected_time_ms: int | None = None
    window_start: int | None = None  # window and session stores: the key's window or session
    window_end: int | None = None


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
    store_sum: int
    differences: int
    first_differences: list[Difference] = field(default_factory=list)
    differences_file: str | None = None
    seconds: float = 0.0
    counted_per: str = "key"  # what one entry counts: key, window or session


def _same_position(a: StoreProgress, b: StoreProgress) -> bool:
    return (a.last_batch_id, a.pending_batch_id, a.offsets) == (b.last_batch_id, b.pending_batch_id, b.offsets)


def snapshot(spark, session, config: CassandraConfig, spec, shape, options: ValidateOptions):
    """The store as a persisted DataFrame and the position it reflects; retried while the
    stream applies batches meanwhile."""
    ranges = options.token_ranges or default_ranges(spark)
    for attempt in range(1, options.attempts + 1):
        before = registry.progress(session, spec.keyspace, spec.name)
        pending = before.pending_batch_id
        if pending is not None and (before.last_batch_id is None or pending > before.last_batch_id):
            problem = f"batch {pending} is being applied (or was left half-applied by a crash)"
        else:
            frame = store_frame(spark, config, shape, ranges).persist()
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
        count = diffs.count()
        path = report_dir / DIFFERENCES_FILE
        report_dir.mkdir(parents=True, exist_ok=True)
        with path.open("w") as out:  # every differing key, streamed: the differences only, never the table
            for difference in diffs.toLocalIterator() if count else ():
                out.write(json.dumps(vars(difference)) + "\n")
        first = diffs.takeOrdered(options.listed, key=lambda d: (d.key, d.window_start or 0)) if count else []
        sums = expected.agg(F.sum("total"), F.sum("recent"), F.count("*")).first()
        store_sum = frame.agg(F.sum("value"), F.count("*")).first()
    finally:
        diffs.unpersist()
        expected.unpersist()
    return RecomputeResult(
        passed=count == 0,
        topics=sorted(json.loads(progress.offsets)) if progress.offsets else [],
        starting_offsets=options.starting_offsets,
        ending_offsets=progress.offsets,
        last_batch_id=progress.last_batch_id,
        expired_before_ms=expired_before_ms,
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
    expected = d.expected if d.expected_at_least in (None, d.expected) else f"{d.expected_at_least}..{d.expected}"
    window = "" if d.window_start is None else f" in [{d.window_start}, {d.window_end}]"
    return f"'{d.key}'{window} ({d.kind}: store {d.stored}, input {expected})"


def latest_cutoff(session, spec) -> int | None:
    """The latest time before which the store may have forgotten a key, so that it counts anew:
    the expire job's last recorded cutoff, or the store's retention at its stream time now (the
    stream counts a key past it from zero, statestore.core.retention), whichever is later."""
    recorded = history.expired_before(session, spec.keyspace, spec.name)
    moment = registry.progress(session, spec.keyspace, spec.name).max_event_time
    at_read = cutoff_ms(spec.retention_ms, None if moment is None else millis_of(moment))
    return max((c for c in (recorded, at_read) if c is not None), default=None)


def validate(
    spark, session, config: CassandraConfig, kafka: KafkaConfig, store: str, options: ValidateOptions, report_dir: Path
) -> ValidationReport:

    spec = registry.lookup(session, config.keyspace, store)
    if spec.store_type.versioned or (spec.key_codec, spec.value_codec) != ("string", "long"):
        raise UnsupportedOperationError(
            f"store '{store}' is not a word-count store (string keys, long values): validation recounts the "
            "word count's input, so it applies to word-count stores of type partitioned-kv, global-kv, "
            "partitioned-window and partitioned-session"
        )
    timed = spec.store_type.timed
    history.ensure_table(session, spec.keyspace)
    run_at = history.now()
    shape = shape_of(session, spec)
    expired_before_ms = None if timed else latest_cutoff(session, spec)
    frame, progress = snapshot(spark, session, config, spec, shape, options)
    try:
        records = input_records(spark, kafka, progress, options.starting_offsets)
        records = without_future_letters(spark, session, spec, records)
        if timed:
            seen = validate_timed.visible(frame, spec.windowing, progress)
            recount = validate_timed.recount(spark, session, spec, records, progress)
        else:
            seen = frame
            recount = Recount(expected_counts(spark, records, expired_before_ms))
        result = recompute(spark, seen, recount, progress, expired_before_ms, options, report_dir)
        replayed = None
        if options.replay_batches and options.checkpoint and not timed:
            replayed_store = replay.ReplayedStore(spec, shape, progress, expired_before_ms)
            replayed = replay.replay_check(spark, session, config, kafka, replayed_store, options)
        checked = None
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
    summary = {"status": report.status, "differences": result.differences, "last_batch_id": progress.last_batch_id}
    history.record(session, spec.keyspace, spec.name, history.VALIDATE, run_at, report.status, None, summary)
    return report
