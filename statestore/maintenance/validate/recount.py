"""What a word-count store's input says it holds: the input records up to the store's
position, and a recount's shape (statestore.maintenance.validate.idempotency compares it with the store)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from statestore.conn.kafka import spark_source_options
from statestore.core.config import KafkaConfig
from statestore.store.book import deadletters
from statestore.store.book.registry import StoreProgress


@dataclass(frozen=True)
class Recount:
    """What the input says the store holds: `expected` rows of the entries' `coordinates`
    (key; key and window start; key and session bounds) with (total, last_ms, recent), or
    None when no batch was applied; `bounds` gives a joined row's window as (start, end)."""

    expected: object | None
    coordinates: tuple[str, ...] = ("key",)
    counted_per: str = "key"
    bounds: Callable | None = None


def input_records(spark, kafka: KafkaConfig, progress: StoreProgress, starting: str):
    """The input topic's records from `starting` up to the store's position (None: no batch yet)."""
    if progress.offsets is None:
        return None
    return (
        spark.read.format("kafka")
        .options(**spark_source_options(kafka))
        .option("subscribe", ",".join(sorted(json.loads(progress.offsets))))
        .option("startingOffsets", starting)
        .option("endingOffsets", progress.offsets)
        .load()
    )


def without_future_letters(spark, session, spec, records):
    """`records` without those the stream dead-lettered as `future` (a time too far ahead of
    their batch's clock, which Kafka alone cannot tell): the stream counted them nowhere."""
    if records is None:
        return None
    future = [
        (d.topic, d.kafka_partition, d.kafka_offset)
        for d in deadletters.read_all(session, spec.keyspace, spec.name)
        if d.reason == deadletters.FUTURE
    ]
    if not future:
        return records
    from pyspark.sql import functions as F

    letters = spark.createDataFrame(future, "topic string, partition int, offset long")
    return records.join(F.broadcast(letters), ["topic", "partition", "offset"], "left_anti")
