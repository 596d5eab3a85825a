"""The five systems of the side-by-side benchmark, each started the same way on a topic.

  partitioned  our job (statestore.stream.job.start) on a partitioned-kv store
  global       our job on a global-kv store
  partitioned-reads
               our job on a partitioned-kv store without the apply cache (--no-apply-cache):
               every key read before it is written, the design before the cache
  rocksdb      Spark's own stateful word count, groupBy(word).count() in update mode to a
               no-op sink, with the RocksDB state store provider
  hdfs         the same with Spark's default, HDFS-backed (in-memory map) provider
  stateless    the same Kafka read and tokenization to a no-op sink: no state, no shuffle,
               the ceiling of what the machine can do
  batch-counts, batch-counts-window, batch-counts-hopping, batch-counts-session
               Spark counting each batch on its own and keeping nothing (foreachBatch: the
               batch's groupBy(word), by window, by hopping window or by session window,
               to a no-op sink): what every exact store of that kind does before it touches
               its state, so a store's Spark CPU less this is what its state costs
  partitioned-window
               our windowed job (--window 1m --grace 1m) on a partitioned-window store
  rocksdb-window
               Spark's own windowed word count, groupBy(window(timestamp, 1 minute), word)
               .count() after a 1-minute watermark, update mode to a no-op sink, RocksDB
               (the grace and the watermark delay keep every record of the corpus on time:
               its partitions are read in step, but not to the millisecond)
  partitioned-hopping
               our windowed job with hopping windows (--window 1m --hop 20s --grace 1m)
  rocksdb-hopping
               Spark's groupBy(window(timestamp, 1 minute, 20 seconds), word).count(), as
               rocksdb-window otherwise
  partitioned-session
               our job on a partitioned-session store (--session-gap 30s --grace 1m)
  rocksdb-session
               Spark's groupBy(session_window(timestamp, 30 seconds), word).count() after a
               1-minute watermark, RocksDB, in append mode (Spark refuses update mode for
               session windows: a session's key changes as it grows), to a no-op sink
  partitioned-lcs
               our job on a partitioned-kv store it creates with --compaction lcs (the seed
               library's LeveledCompactionStrategy instead of the default UCS)
  write-ceiling
               our job on a partitioned-kv store with blind writes instead of the apply
               (compare/ceiling.py): each batch's distinct keys written once, nothing read,
               the Cassandra write ceiling of any design that writes every distinct key once
               per batch (its counts are wrong by design)
  partitioned-aggregate
               our job on JSON events (compare/events.py) into a partitioned-kv aggregate store:
               --input-format json --key user --time-field ts --aggregate "n=count(),
               total=sum(amount), hi=max(amount)"
  rocksdb-aggregate
               Spark's own: the same JSON parsed as a VARIANT (try_parse_json, as our input
               stage), groupBy(user).agg(count, sum(amount), max(amount)) in update mode to a
               no-op sink, RocksDB
  partitioned-window-aggregate
               the same job per user and 1-minute tumbling window of the events' time (--window
               1m --grace 1m, as the windowed word count) into a partitioned-window aggregate store
  rocksdb-window-aggregate
               Spark's own: the same parse, withWatermark(ts, 1 minute).groupBy(window(ts,
               1 minute), user).agg(count, sum, max) in update mode to a no-op sink, RocksDB

All read the topic from the earliest offset with the same maxOffsetsPerTrigger and use the
session's shuffle partitions (the job's default, 4; for Spark's stores that is also the
number of state store partitions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
OURS = {
    "partitioned": "partitioned-kv",
    "partitioned-nolog": "partitioned-kv",
    "partitioned-lcs": "partitioned-kv",
    "global": "global-kv",
    "partitioned-reads": "partitioned-kv",
    "write-ceiling": "partitioned-kv",
    "partitioned-window": "partitioned-window",
    "partitioned-hopping": "partitioned-window",
    "partitioned-session": "partitioned-session",
    "partitioned-aggregate": "partitioned-kv",
    "partitioned-window-aggregate": "partitioned-window",
}
WINDOW_MS = 60_000  # the windowed systems' window, and every timed system's grace (watermark delay)
HOP_MS = 20_000  # the hopping systems' hop: each record counts in three windows
SESSION_GAP_MS = 30_000
BLIND = "write-ceiling"
# Our job with exact counts (the write ceiling runs our job's driver only).
REAL_JOB = tuple(system for system in OURS if system != BLIND)
UNCACHED = ("partitioned-reads",)
# The job without its stream log's batch rows: what recording progress costs.
UNLOGGED = ("partitioned-nolog",)
# Our job on a store created with the seed's compaction, LCS.
LEVELED = ("partitioned-lcs",)
PROVIDERS = {
    "rocksdb": ROCKSDB_PROVIDER,
    "hdfs": HDFS_PROVIDER,
    "rocksdb-window": ROCKSDB_PROVIDER,
    "rocksdb-hopping": ROCKSDB_PROVIDER,
    "rocksdb-session": ROCKSDB_PROVIDER,
    "rocksdb-aggregate": ROCKSDB_PROVIDER,
    "rocksdb-window-aggregate": ROCKSDB_PROVIDER,
}
SYSTEMS = (
    "partitioned",
    "partitioned-nolog",
    "partitioned-lcs",
    "partitioned-reads",
    "global",
    "rocksdb",
    "hdfs",
    "stateless",
    "write-ceiling",
    "partitioned-window",
    "rocksdb-window",
    "partitioned-hopping",
    "rocksdb-hopping",
    "partitioned-session",
    "rocksdb-session",
    "partitioned-aggregate",
    "rocksdb-aggregate",
    "partitioned-window-aggregate",
    "rocksdb-window-aggregate",
    "batch-counts",
    "batch-counts-window",
    "batch-counts-hopping",
    "batch-counts-session",
)
STATEFUL = ("partitioned", "global", "rocksdb", "hdfs")
# Not in the default run (`--systems` names them, `make bench-timed` runs them): the windowed
# and sessioned word counts and Spark's own. HOPPING: windows every HOP_MS.
WINDOWED = ("partitioned-window", "rocksdb-window", "partitioned-hopping", "rocksdb-hopping")
HOPPING = ("partitioned-hopping", "rocksdb-hopping")
SESSIONED = ("partitioned-session", "rocksdb-session")
TIMED = (*WINDOWED, *SESSIONED)
# Spark's counts of each batch alone, by the grouping of the kind named (none: per word).
BATCH_COUNTS = {
    "batch-counts": None,
    "batch-counts-window": "window",
    "batch-counts-hopping": "hopping",
    "batch-counts-session": "session",
}
# Each of our word counts beside the batch-counts system of its kind.
BATCH_COUNTS_OF = {
    "partitioned": "batch-counts",
    "partitioned-window": "batch-counts-window",
    "partitioned-hopping": "batch-counts-hopping",
    "partitioned-session": "batch-counts-session",
}
# JSON events aggregated per user, then per user and 1-minute window (`streaming_compare.py
# --aggregate`, make bench-aggregate runs all four).
WINDOW_AGGREGATED = ("partitioned-window-aggregate", "rocksdb-window-aggregate")
AGGREGATED = ("partitioned-aggregate", "rocksdb-aggregate", *WINDOW_AGGREGATED)
# Each of our systems beside the Spark operator that computes the same on RocksDB.
COUNTERPARTS = {
    "partitioned": "rocksdb",
    "partitioned-window": "rocksdb-window",
    "partitioned-hopping": "rocksdb-hopping",
    "partitioned-session": "rocksdb-session",
    "partitioned-aggregate": "rocksdb-aggregate",
    "partitioned-window-aggregate": "rocksdb-window-aggregate",
}
OPTIONAL = (*TIMED, *UNLOGGED, *LEVELED, *AGGREGATED, *BATCH_COUNTS)
LABELS = {
    "partitioned": "statestore, partitioned-kv",
    "partitioned-reads": "statestore, partitioned-kv, no apply cache",
    "partitioned-nolog": "statestore, partitioned-kv, batches not logged",
    "partitioned-lcs": "statestore, partitioned-kv, LCS compaction",
    "global": "statestore, global-kv",
    "rocksdb": "Spark, RocksDB provider",
    "hdfs": "Spark, HDFS-backed provider",
    "stateless": "stateless ceiling",
    "batch-counts": "Spark, each batch's groupBy(word) alone, no state",
    "batch-counts-window": "Spark, each batch's groupBy(window(1 min), word) alone, no state",
    "batch-counts-hopping": "Spark, each batch's groupBy(window(1 min, 20 s), word) alone, no state",
    "batch-counts-session": "Spark, each batch's groupBy(session_window(30 s), word) alone, no state",
    "write-ceiling": "Cassandra write ceiling (blind writes)",
    "partitioned-window": "statestore, partitioned-window (1 min windows)",
    "rocksdb-window": "Spark, RocksDB provider, window(1 min) groupBy",
    "partitioned-hopping": "statestore, partitioned-window (1 min windows every 20 s)",
    "rocksdb-hopping": "Spark, RocksDB provider, window(1 min, 20 s) groupBy",
    "partitioned-session": "statestore, partitioned-session (gap 30 s)",
    "rocksdb-session": "Spark, RocksDB provider, session_window(30 s) groupBy",
    "partitioned-aggregate": "statestore, partitioned-kv aggregate store (count, sum, max per user)",
    "rocksdb-aggregate": "Spark, RocksDB provider, groupBy(user).agg(count, sum, max)",
    "partitioned-window-aggregate": "statestore, partitioned-window aggregate store (count, sum, max per user "
    "and 1 min window)",
    "rocksdb-window-aggregate": "Spark, RocksDB provider, withWatermark(ts, 1 min).groupBy(window(ts, 1 min), user)"
    ".agg(count, sum, max)",
}


def session_conf(system: str, shuffle_partitions: int, driver_memory: str) -> dict[str, str]:
    """Spark settings of a system's session: the same for all but the state store provider."""
    conf = {
        "spark.ui.enabled": "false",
        "spark.driver.memory": driver_memory,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        # The latency runs trigger every second for a minute or more: keep every event.
        "spark.sql.streaming.numRecentProgressUpdates": "5000",
    }
    if system in PROVIDERS:
        conf["spark.sql.streaming.stateStore.providerClass"] = PROVIDERS[system]
    return conf


@dataclass
class Running:
    """A started query of any system; `stop()` ends it (and releases our job's lease)."""

    query: object
    stop: Callable[[], None]


@dataclass(frozen=True)
class Target:
    """Where a run reads and keeps its progress."""

    topic: str
    name: str  # our store's name; the query name for Spark's systems
    checkpoint: str
    trigger: str  # "available-now" or an interval such as "1s"


def start_system(
    spark,
    system: str,
    target: Target,
    cassandra,
    kafka,
    max_offsets: int | None,
    seams=None,
    driver_records: int | None = None,
) -> Running:
    """Start `system` on the target. `seams` (our systems only): the statestore BatchSeams to
    run our job with (None: the job as shipped); `driver_records`: our job's
    --driver-apply-records (None: the job's default)."""
    if system in OURS:
        return _start_ours(spark, system, target, cassandra, kafka, max_offsets, seams, driver_records)
    return _start_native(spark, system, target, kafka, max_offsets)


def _start_ours(spark, system, target: Target, cassandra, kafka, max_offsets, seams, driver_records) -> Running:
    from statestore.core.config import StreamConfig
    from statestore.stream.job import JobConfig, start
    from statestore.stream.writer import SHIPPED

    stream = StreamConfig(
        topic=target.topic,
        store=target.name,
        checkpoint=target.checkpoint,
        store_type=OURS[system],
        trigger=target.trigger,
        max_offsets_per_trigger=max_offsets,
        apply_cache=system not in UNCACHED,
        window=WINDOW_MS if system in WINDOWED or system in WINDOW_AGGREGATED else None,
        hop=HOP_MS if system in HOPPING else None,
        session_gap=SESSION_GAP_MS if system in SESSIONED else None,
        grace=WINDOW_MS if system in TIMED or system in WINDOW_AGGREGATED else None,
        compaction="LeveledCompactionStrategy" if system in LEVELED else None,
        **(_json_settings() if system in AGGREGATED else {}),
        **({} if driver_records is None else {"driver_apply_records": driver_records}),
    )
    seams = seams or SHIPPED
    if system in UNLOGGED:
        seams = replace(seams, log_batches=False)
    running = start(spark, JobConfig(stream, cassandra, kafka), seams)
    return Running(running.query, running.stop)


def _json_settings() -> dict:
    from compare.events import KEY_FIELD, MEASURES, TIME_FIELD

    return {"input_format": "json", "aggregate": MEASURES, "key": KEY_FIELD, "time_field": TIME_FIELD}


def native_aggregate(spark, topic: str, kafka, max_offsets: int | None, windowed: bool = False):
    """Spark's own count, sum and max of the events' amounts per user, as a streaming DataFrame:
    each record parsed once as a VARIANT (our input stage's parse), its fields read by path.
    `windowed`: per user and 1-minute tumbling window of the event time (ts, epoch ms, as a
    timestamp), after a watermark of one window (our grace)."""
    from pyspark.sql import functions as F

    from compare.events import AMOUNT_FIELD, KEY_FIELD, TIME_FIELD

    record = F.expr("try_parse_json(CAST(value AS STRING))").alias("record")
    events = _kafka_stream(spark, topic, kafka, max_offsets).select(record)
    times = [F.expr(f"timestamp_millis(variant_get(record, '$.{TIME_FIELD}', 'long'))").alias(TIME_FIELD)]
    fields = events.select(
        F.expr(f"variant_get(record, '$.{KEY_FIELD}', 'string')").alias(KEY_FIELD),
        F.expr(f"variant_get(record, '$.{AMOUNT_FIELD}', 'double')").alias(AMOUNT_FIELD),
        *(times if windowed else []),
    )
    if windowed:
        minute = f"{WINDOW_MS // 1000} seconds"
        grouped = fields.withWatermark(TIME_FIELD, minute).groupBy(F.window(TIME_FIELD, minute), KEY_FIELD)
    else:
        grouped = fields.groupBy(KEY_FIELD)
    return grouped.agg(
        F.count(F.lit(1)).alias("n"), F.sum(AMOUNT_FIELD).alias("total"), F.max(AMOUNT_FIELD).alias("hi")
    )


def _kafka_stream(spark, topic: str, kafka, max_offsets: int | None):
    from statestore.conn.kafka import spark_source_options

    reader = (
        spark.readStream.format("kafka")
        .options(**spark_source_options(kafka))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    return reader.load()


def native_words(spark, topic: str, kafka, max_offsets: int | None, with_time: bool = False):
    """The words of the topic as a streaming DataFrame: our job's tokenization and Kafka
    consumer settings (`with_time`: with each record's Kafka timestamp as `timestamp`)."""
    from pyspark.sql import functions as F

    from statestore.stream.tokenize import words_column

    timed = ["timestamp"] if with_time else []
    words = _kafka_stream(spark, topic, kafka, max_offsets).select(
        F.explode(words_column(F.col("value").cast("string"))).alias("word"), *timed
    )
    return words.filter(F.length("word") > 0)


def _start_native(spark, system, target: Target, kafka, max_offsets) -> Running:
    if system in BATCH_COUNTS:
        words = native_words(spark, target.topic, kafka, max_offsets, BATCH_COUNTS[system] is not None)
        writer = words.writeStream.foreachBatch(_batch_counter(BATCH_COUNTS[system])).outputMode("append")
    else:
        output, mode = _native_query(spark, system, target, kafka, max_offsets)
        writer = output.writeStream.format("noop").outputMode(mode)
    writer = writer.queryName(target.name).option("checkpointLocation", target.checkpoint)
    if target.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        from statestore.core.config import trigger_seconds

        writer = writer.trigger(processingTime=f"{trigger_seconds(target.trigger)} seconds")
    query = writer.start()

    def stop() -> None:
        if query.isActive:
            query.stop()

    return Running(query, stop)


def _batch_counter(grouping: str | None):
    """foreachBatch's function of a batch-counts system: the batch's counts by `grouping`
    (BATCH_COUNTS) computed whole and dropped (a no-op sink)."""
    keys = _grouping_columns(grouping)

    def count(batch_df, batch_id: int) -> None:
        batch_df.groupBy(*keys, "word").count().write.format("noop").mode("overwrite").save()

    return count


def _grouping_columns(grouping: str | None) -> list:
    """The columns a count groups by before the word: none, the 1-minute window, the window
    every 20 s, or the 30-second session window of each word's `timestamp` (BATCH_COUNTS)."""
    from pyspark.sql import functions as F

    if grouping is None:
        return []
    if grouping == "session":
        return [F.session_window("timestamp", f"{SESSION_GAP_MS // 1000} seconds")]
    if grouping == "hopping":
        return [F.window("timestamp", f"{WINDOW_MS // 1000} seconds", f"{HOP_MS // 1000} seconds")]
    return [F.window("timestamp", f"{WINDOW_MS // 1000} seconds")]


def _native_query(spark, system, target: Target, kafka, max_offsets):
    """The system's streaming DataFrame and its output mode."""
    if system in AGGREGATED:
        return native_aggregate(spark, target.topic, kafka, max_offsets, system in WINDOW_AGGREGATED), "update"
    words = native_words(spark, target.topic, kafka, max_offsets, system in TIMED)
    if system == "stateless":
        output, mode = words, "append"
    elif system in TIMED:
        grouping = "session" if system in SESSIONED else "hopping" if system in HOPPING else "window"
        mode = "append" if system in SESSIONED else "update"
        late_by = f"{WINDOW_MS // 1000} seconds"
        output = words.withWatermark("timestamp", late_by).groupBy(*_grouping_columns(grouping), "word").count()
    else:
        output, mode = words.groupBy("word").count(), "update"
    return output, mode


def state_rows(events: list[dict]) -> int | None:
    """The number of keys in Spark's state after the last batch (its progress event says)."""
    for event in reversed(events):
        operators = event.get("stateOperators") or []
        if operators and event.get("numInputRows", 0) > 0:
            return sum(op.get("numRowsTotal", 0) for op in operators)
    return None
