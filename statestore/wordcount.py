"""The streaming word count: Kafka text lines -> counts in a Cassandra store.

Spark reads the topic and keeps only offsets in its checkpoint (no Spark state store).
Each micro-batch is tokenized and aggregated with Spark SQL built-ins into
(word, delta, latest event time); executors then apply the deltas to the store with the
replay-safe apply (statestore.apply), and the driver records the batch in the registry.
Input that cannot be counted goes to the store's dead-letter table.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from statestore import batches, checkpoint, deadletters, registry
from statestore import config as cfg
from statestore.apply import UNCOUNTABLE
from statestore.batches import BatchApplier
from statestore.cassandra import require_keyspace, session_for
from statestore.config import CassandraConfig, KafkaConfig, StreamConfig
from statestore.errors import ConfigError, KafkaError, StateStoreError
from statestore.kafka_io import partition_count
from statestore.lease import StoreLease
from statestore.provision import DEFAULT_STORE_TYPE, provision_store
from statestore.retry import with_retries
from statestore.stores import StoreSpec, StoreType
from statestore.stores.base import MAX_KEY_BYTES
from statestore.tokenize import words_column

_log = logging.getLogger("statestore.wordcount")


@dataclass(frozen=True)
class JobConfig:
    stream: StreamConfig
    cassandra: CassandraConfig
    kafka: KafkaConfig


def resolve_store(session, job: JobConfig) -> StoreSpec:
    """The store to write: as registered, or a new one with the requested layout."""
    require_keyspace(session, job.cassandra.keyspace)
    registry.ensure_table(session, job.cassandra.keyspace)
    existing = registry.find(session, job.cassandra.keyspace, job.stream.store)
    store_type = StoreType(job.stream.store_type) if job.stream.store_type else None
    if existing is not None:
        wanted = StoreSpec(
            existing.keyspace,
            existing.name,
            store_type or existing.store_type,
            job.stream.partitions or existing.partitions,
        )
        return provision_store(session, wanted, job.stream.topic)
    partitions = job.stream.partitions or partition_count(job.kafka, job.stream.topic)
    if partitions is None:
        raise KafkaError(
            f"topic '{job.stream.topic}' does not exist at {job.kafka.bootstrap_servers}: create it "
            f"(`statestore produce {job.stream.topic} FILE` does) or pass --partitions"
        )
    spec = StoreSpec(job.cassandra.keyspace, job.stream.store, store_type or DEFAULT_STORE_TYPE, partitions)
    return provision_store(session, spec, job.stream.topic)


def _kafka_source(spark, job: JobConfig, starting_offsets: str):
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", job.kafka.bootstrap_servers)
        .option("subscribe", job.stream.topic)
        .option("startingOffsets", starting_offsets)
    )
    if job.stream.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(job.stream.max_offsets_per_trigger))
    return reader.load()


def dead_letter_rows(batch_df):
    """Messages that cannot be counted at all (null, not UTF-8) and messages holding a word
    too long for a Cassandra key, as (topic, partition, offset, ts_ms, reason, detail, raw)."""
    from pyspark.sql import functions as F

    value = F.col("value")
    unreadable = batch_df.select(
        "topic",
        "partition",
        "offset",
        F.unix_millis("timestamp").alias("ts_ms"),
        F.when(value.isNull(), F.lit(deadletters.NULL_VALUE))
        .when(~F.is_valid_utf8(value), F.lit(deadletters.INVALID_UTF8))
        .alias("reason"),
        value.alias("raw"),
    ).filter(F.col("reason").isNotNull())
    unreadable = unreadable.select(
        "topic",
        "partition",
        "offset",
        "ts_ms",
        "reason",
        F.when(F.col("reason") == deadletters.NULL_VALUE, F.lit("the message has no value"))
        .otherwise(F.lit("the value is not valid UTF-8 text; nothing of it was counted"))
        .alias("detail"),
        "raw",
    )
    # Only a message longer than 2/3 of the key limit can hold a word longer than it once
    # lower-cased (lower-casing grows UTF-8 by at most half: U+023A, 2 bytes, becomes U+2C65,
    # 3 bytes): the cheap length filter keeps the tokenization here off all ordinary messages.
    # Per message, with array functions, so the check needs no shuffle.
    too_long = F.filter(words_column(F.col("value").cast("string")), lambda w: F.octet_length(w) > MAX_KEY_BYTES)
    long_words = (
        _readable(batch_df)
        .filter(F.octet_length("value") > MAX_KEY_BYTES * 2 // 3)
        .select(
            "topic",
            "partition",
            "offset",
            F.unix_millis("timestamp").alias("ts_ms"),
            too_long.alias("words"),
            value.alias("raw"),
        )
        .filter(F.size("words") > 0)
        .select(
            "topic",
            "partition",
            "offset",
            "ts_ms",
            F.lit(deadletters.KEY_TOO_LONG).alias("reason"),
            F.format_string(
                f"%d word(s) over the {MAX_KEY_BYTES}-byte key limit (longest %d bytes) were not "
                "counted; the message's other words were",
                F.size("words"),
                F.array_max(F.transform("words", lambda w: F.octet_length(w))),
            ).alias("detail"),
            "raw",
        )
    )
    return unreadable.unionByName(long_words)


def _is_readable():
    """True for a message whose value is UTF-8 text (the one rule of what can be counted)."""
    from pyspark.sql import functions as F

    return F.col("value").isNotNull() & F.is_valid_utf8("value")


def _readable(batch_df):
    return batch_df.filter(_is_readable())


def batch_deltas(batch_df, with_uncountable: bool = False):
    """(word, delta, last_ms) for every countable word of the batch.

    `with_uncountable`: plus one row under statestore.apply.UNCOUNTABLE, when the batch has
    any, whose delta counts the messages without UTF-8 text and the words over the key limit
    (what dead_letter_rows finds). The apply job then tells whether the batch has dead letters
    at all, so the usual batch, which has none, runs no job of its own to find out.
    """
    from pyspark.sql import functions as F

    value, word = F.col("value"), F.col("word")
    tokens = F.when(_is_readable(), words_column(value.cast("string"))).otherwise(F.array(F.lit(UNCOUNTABLE)))
    words = batch_df.select(F.explode(tokens).alias("word"), "timestamp").select(
        F.when(F.octet_length(word) > MAX_KEY_BYTES, F.lit(UNCOUNTABLE)).otherwise(word).alias("word"), "timestamp"
    )
    keep = F.length(word) > 0
    if not with_uncountable:
        keep = keep & (word != F.lit(UNCOUNTABLE))
    return (
        words.filter(keep)
        .groupBy("word")
        .agg(F.count("*").alias("delta"), F.max(F.unix_millis("timestamp")).alias("last_ms"))
    )


def batch_version_ms(batch_df) -> int | None:
    """The batch's largest Kafka record timestamp (epoch ms): where versioned stores' new
    versions start. The same records give the same time, so a replay writes the same versions."""
    from pyspark.sql import functions as F

    return batch_df.agg(F.max(F.unix_millis("timestamp"))).first()[0]


@dataclass
class RunningStream:
    """A started word-count query with the lease it holds; `stop()` ends both."""

    query: object
    applier: BatchApplier
    lease: StoreLease

    def stop(self) -> None:
        try:
            if self.query.isActive:
                self.query.stop()
        finally:
            self.lease.release()


def _check_checkpoint(spark, session, job: JobConfig, spec: StoreSpec) -> str:
    """Refuse a checkpoint that does not belong to the store's history (before any read);
    with --recover-from-store, finish the store's pending batch first. Returns where a new
    checkpoint starts reading: the store's position when recovering, else --starting-offsets."""
    progress = registry.progress(session, spec.keyspace, spec.name)
    owner = checkpoint.query_id(spark, job.stream.checkpoint)
    problem = batches.checkpoint_problem(progress, owner, job.stream.recover_from_store)
    if problem:
        raise batches.mismatch_error(spec.name, job.stream.checkpoint, problem)
    if owner is None and progress.has_batches:  # only reached with --recover-from-store
        batches.finish_pending_batch(spark, job.cassandra, spec, job.kafka.bootstrap_servers)
        return registry.progress(session, spec.keyspace, spec.name).offsets or job.stream.starting_offsets
    return job.stream.starting_offsets


def start(spark, job: JobConfig) -> RunningStream:
    """Provision the store, take its lease, check the checkpoint, start the query."""
    session = session_for(job.cassandra)
    spec = with_retries(job.cassandra, "preparing the store", lambda: resolve_store(session, job))
    lease = StoreLease(session, spec.keyspace, spec.name, job.stream.checkpoint, job.stream.lease_ttl_s)
    with_retries(job.cassandra, "taking the store's lease", lease.acquire)
    lease.start_renewing()
    try:
        starting = with_retries(
            job.cassandra, "checking the checkpoint", lambda: _check_checkpoint(spark, session, job, spec)
        )
        applier = BatchApplier(spark, job.cassandra, spec, job.stream.checkpoint, lease)
        writer = (
            _kafka_source(spark, job, starting)
            .writeStream.queryName(f"wordcount-{spec.name}")
            .option("checkpointLocation", job.stream.checkpoint)
            .foreachBatch(applier)
        )
        if job.stream.trigger == "available-now":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{cfg.trigger_seconds(job.stream.trigger)} seconds")
        # The id is known only once the query exists; batches wait for it (see BatchApplier).
        query = writer.start()
        applier.query_id = str(query.id)
        applier.started.set()
    except BaseException:
        lease.release()
        raise
    return RunningStream(query, applier, lease)


def parse_args(argv: Sequence[str] | None, env=None) -> JobConfig:
    parser = argparse.ArgumentParser(
        prog="wordcount_stream", description="Count words from a Kafka topic into a Cassandra store."
    )
    for section in (StreamConfig, CassandraConfig, KafkaConfig):
        cfg.add_arguments(parser, section)
    args = parser.parse_args(argv)
    return JobConfig(
        stream=cfg.from_args(StreamConfig, args, env),
        cassandra=cfg.from_args(CassandraConfig, args, env),
        kafka=cfg.from_args(KafkaConfig, args, env),
    )


def run(job: JobConfig) -> int:
    from statestore.spark import build_session

    spark = build_session(f"statestore-wordcount-{job.stream.store}")
    stream = start(spark, job)
    try:
        stream.query.awaitTermination()
    finally:
        stream.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        return run(parse_args(argv))
    except (StateStoreError, ConfigError) as exc:
        print(f"wordcount_stream: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the job's last resort: report and exit non-zero
        message = str(exc)
        cause = _store_error_in(message)
        print(f"wordcount_stream: {cause or message}", file=sys.stderr)
        return 1


def _store_error_in(message: str) -> str | None:
    """Spark wraps an error raised in foreachBatch in its own exception text; pull ours out."""
    for line in message.splitlines():
        for name in ("CheckpointMismatchError", "CassandraUnavailableError", "LeaseLostError"):
            if f"{name}:" in line:
                return line.split(f"{name}:", 1)[1].strip()
    return None
