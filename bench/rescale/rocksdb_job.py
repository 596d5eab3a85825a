"""spark-submit entry point of the rescale benchmark: Spark's own stateful word count,
groupBy(word).count() in update mode to a no-op sink, its state in the RocksDB state store
provider (the side by side's `rocksdb` system, with our job's tokenization and Kafka settings).

    spark-submit --py-files statestore.zip bench/rescale/rocksdb_job.py \
        --topic T --checkpoint DIR --events OUT.json

Runs with the available-now trigger and writes the query's progress events, with when the query
was started (epoch ms), to OUT.json: rescale.py reads from them the first batch's time and the
number of shuffle (state store) partitions Spark really used. The Kafka settings come from the
STATESTORE_KAFKA_* environment, as for our job.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--events", required=True, type=Path)
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from statestore.conn.kafka import spark_source_options
    from statestore.core import config as cfg
    from statestore.core.config import KafkaConfig
    from statestore.stream.tokenize import words_column

    spark = (
        SparkSession.builder.appName("rescale-rocksdb")
        .config("spark.sql.streaming.stateStore.providerClass", PROVIDER)
        .getOrCreate()
    )
    kafka = cfg.resolve(KafkaConfig)
    words = (
        spark.readStream.format("kafka")
        .options(**spark_source_options(kafka))
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .load()
        .select(F.explode(words_column(F.col("value").cast("string"))).alias("word"))
        .filter(F.length("word") > 0)
    )
    started_ms = time.time() * 1000
    query = (
        words.groupBy("word")
        .count()
        .writeStream.format("noop")
        .outputMode("update")
        .queryName("rescale-rocksdb")
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    events = [json.loads(p.json) for p in query.recentProgress]
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    report = {"started_ms": started_ms, "session_shuffle_partitions": shuffle, "events": events}
    args.events.write_text(json.dumps(report))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
