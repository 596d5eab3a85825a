"""Replay check: re-apply the stream's last N batches to a shadow copy and see nothing change.

The shadow is a new table of the same layout (`<store>_shadow`), filled by Spark tasks from
the store over token ranges. Each replayed batch reads exactly its Kafka records (its start
and end offsets from Spark's offset log in the checkpoint: `offsets/<b-1>` and `offsets/<b>`,
or `sources/0/0` for the first batch) and goes through the stream's own apply
(statestore.stream.apply.partition_applier) under its logical batch id. A store that is replay-safe
skips every row (each was written by that batch or a later one); any write, or any
difference between the shadow before and after, fails the check and names the keys.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

from pyspark.sql import functions as F

from statestore.conn.cassandra import DDL_PROFILE, session_for
from statestore.conn.kafka import spark_source_options
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.errors import CheckpointMismatchError
from statestore.core.model import StoreSpec
from statestore.maintenance.shared.scan import (
    TableShape,
    default_ranges,
    scan_range,
    shape_of,
    store_frame,
    token_splits,
)
from statestore.store.book.registry import StoreProgress
from statestore.store.tables import table_for
from statestore.store.tables.base import entry_from_row
from statestore.stream import checkpoint
from statestore.stream.apply import ApplyStats, partition_applier, run_applier
from statestore.stream.checkpoint import QueryCheckpoint
from statestore.stream.position import now_micros
from statestore.stream.transforms import batch_deltas

_log = logging.getLogger("statestore.maintenance.validate.replay")


@dataclass
class ReplayResult:
    passed: bool
    summary: str
    checkpoint: str
    batches: list[int] = field(default_factory=list)
    keys_replayed: int = 0
    rows_rewritten: int = 0
    changed_keys: list[str] = field(default_factory=list)
    changed: int = 0
    seconds: float = 0.0
    recreated: int = 0  # expired keys the replay wrote back from input older than the expiry cutoff


@dataclass(frozen=True)
class ReplayedStore:
    """The store whose last batches a replay check re-applies (to a shadow copy): its registration,
    its table's shape, the position its stream recorded, and expiry's recorded cutoff (None: never
    expired), before which a key the replay writes back is an expired key returning, not a change."""

    spec: StoreSpec
    shape: TableShape
    progress: StoreProgress
    expired_before_ms: int | None = None


def replay_plan(last_logical: int | None, batch_base: int, logged: set[int], wanted: int) -> list[int]:
    """The Spark batch ids to replay, oldest first: the last `wanted` applied batches whose
    end offsets are still in the offset log, and whose start is known (pure)."""
    if last_logical is None or wanted < 1:
        return []
    last = last_logical - batch_base
    plan = []
    for spark_id in range(last, max(-1, last - wanted), -1):
        if spark_id not in logged or (spark_id > 0 and spark_id - 1 not in logged):
            break
        plan.append(spark_id)
    return plan[::-1]


def _offset_log_ids(spark, location: str) -> set[int]:
    path, fs = checkpoint._path(spark, location, "offsets")
    if not fs.exists(path):
        return set()
    return {int(s.getPath().getName()) for s in fs.listStatus(path) if s.getPath().getName().isdigit()}


def _initial_offsets(spark, location: str) -> str:
    """Where the checkpoint's first batch started (Spark writes it under sources/0/0)."""
    path, fs = checkpoint._path(spark, location, "sources", "0", "0")
    lines = checkpoint._read_lines(spark, path, fs)
    offsets = json.loads(lines[-1][lines[-1].index("{") :])
    return json.dumps(offsets, sort_keys=True, separators=(",", ":"))


def _copy_task(config: CassandraConfig, shape: TableShape, shadow: StoreSpec, page_size: int = 5000):
    """Spark task: copy the store's rows of some token ranges into the shadow table, keeping
    each row's value, batch id and event time (entry_from_row reads them by column name)."""

    def run(ranges):

        session = session_for(config)
        table = table_for(shadow)
        for token_range in ranges:
            chunk = []
            for row in scan_range(session, shape, token_range, page_size):
                chunk.append(entry_from_row(row))
                if len(chunk) >= 2000:
                    table.write_entries(session, chunk, config.write_concurrency, None)
                    chunk = []
            table.write_entries(session, chunk, config.write_concurrency, None)
        yield 1

    return run


def make_shadow(spark, session, config: CassandraConfig, shape: TableShape, shadow: StoreSpec, ranges: int) -> None:
    """Create the shadow table afresh and copy the store (of `shape`) into it."""
    session.execute(
        f"DROP TABLE IF EXISTS {shadow.keyspace}.{shadow.table}", execution_profile=DDL_PROFILE, timeout=120
    )
    session.execute(table_for(shadow).create_cql(), execution_profile=DDL_PROFILE)
    splits = token_splits(ranges)
    spark.sparkContext.parallelize(splits, len(splits)).mapPartitions(_copy_task(config, shape, shadow)).count()


def replay_check(
    spark, session, config: CassandraConfig, kafka: KafkaConfig, store: ReplayedStore, options
) -> ReplayResult:
    """Replay the last `options.replay_batches` batches of `store` from its stream's checkpoint
    (`options.checkpoint`, which must be the one that last wrote it) onto a shadow copy, and pass
    when nothing changes but expired keys written back; `options.listed` changed keys are named."""
    spec, progress = store.spec, store.progress
    location = options.checkpoint
    began = time.monotonic()
    owner = checkpoint.query_id(spark, location)
    if owner != progress.query_id:
        raise CheckpointMismatchError(
            f"checkpoint {location} belongs to query {owner}, but store '{spec.name}' was last written by query "
            f"{progress.query_id}: pass the stream's own --checkpoint to replay its batches"
        )
    plan = replay_plan(
        progress.last_batch_id, progress.batch_base, _offset_log_ids(spark, location), options.replay_batches
    )
    if not plan:
        return ReplayResult(True, "no batch to replay (none applied, or the offset log was purged)", location)
    ranges = options.token_ranges or default_ranges(spark)
    shadow = StoreSpec(
        spec.keyspace,
        spec.name,
        spec.store_type,
        spec.partitions,
        f"{spec.name}_shadow",
        subpartitions=spec.subpartitions,
    )
    try:
        make_shadow(spark, session, config, store.shape, shadow, ranges)
        shadow_shape = shape_of(session, shadow)
        before = store_frame(spark, config, shadow_shape, ranges).persist()
        before.count()
        stats = ApplyStats()
        for spark_id in plan:
            stats += _replay_batch(spark, config, kafka, shadow, location, spark_id, spark_id + progress.batch_base)
        after = store_frame(spark, config, shadow_shape, ranges)
        changed = _changed_keys(before, after, store.expired_before_ms).persist()
        recreated = changed.filter("recreated").count()
        unexpected = changed.filter("NOT recreated")
        count = unexpected.count()
        first = sorted(unexpected.limit(options.listed).rdd.map(lambda r: r.key).collect())
        changed.unpersist()
        before.unpersist()
    finally:
        session.execute(
            f"DROP TABLE IF EXISTS {shadow.keyspace}.{shadow.table}", execution_profile=DDL_PROFILE, timeout=120
        )
    logical = [b + progress.batch_base for b in plan]
    passed = count == 0 and stats.written == recreated
    batches = f"replaying batches {logical[0]}..{logical[-1]}"
    summary = (
        f"{batches} changed nothing ({stats.skipped} keys already applied)"
        + (
            f"; {recreated} expired key(s) were written back from input older than the expiry cutoff, as the "
            "stream itself would (expiry forgets a key; replaying its old input counts it again)"
            if recreated
            else ""
        )
        if passed
        else f"{batches} rewrote {stats.written} row(s) and changed {count} key(s): "
        + ", ".join(f"'{k}'" for k in first)
    )
    seconds = round(time.monotonic() - began, 2)
    return ReplayResult(passed, summary, location, logical, stats.keys, stats.written, first, count, seconds, recreated)


def _replay_batch(
    spark, config, kafka: KafkaConfig, shadow: StoreSpec, location: str, spark_id: int, logical: int
) -> ApplyStats:

    saved = QueryCheckpoint(spark, location)
    start = _initial_offsets(spark, location) if spark_id == 0 else saved.end_offsets(spark_id - 1).as_json()
    end = saved.end_offsets(spark_id)
    records = (
        spark.read.format("kafka")
        .options(**spark_source_options(kafka))
        .option("subscribe", ",".join(end.topics))
        .option("startingOffsets", start)
        .option("endingOffsets", end.as_json())
        .load()
    )
    applier = partition_applier(config, shadow, logical, now_micros())
    stats = run_applier(batch_deltas(records), applier)
    _log.info(
        "replayed batch %d (spark %d) on the shadow: %d keys, %d rewritten",
        logical,
        spark_id,
        stats.keys,
        stats.written,
    )
    return stats


def _changed_keys(before, after, expired_before_ms: int | None = None):
    """Keys whose row differs between two frames of the same table (added, removed or changed),
    each with `recreated`: the key was absent before and the replay wrote it from input older
    than the expiry cutoff (an expired key coming back, not a double count)."""

    columns = [c for c in before.columns if c != "key"]
    joined = before.alias("b").join(after.alias("a"), "key", "full_outer")
    differs = F.lit(False)
    for c in columns:
        differs = differs | ~F.col(f"b.{c}").eqNullSafe(F.col(f"a.{c}"))
    recreated = F.lit(False)
    if expired_before_ms is not None:
        recreated = F.col("b.value").isNull() & (F.col("a.time") < F.lit(expired_before_ms))
    return joined.filter(differs).select("key", recreated.alias("recreated"))
