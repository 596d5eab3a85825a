"""spark-submit entry point, and an example of your own query into an aggregate store: JSON orders
from a Kafka topic, cancelled ones left out, each joined with its shop's region from a small
static table, then kept per region/shop as measures by statestore.stream.own_query.

    spark-submit --jars <kafka connector jars> jobs/own_aggregation.py \
        --topic orders --store revenue --checkpoint /path/to/checkpoint [--shops shops.csv] [--trigger 10s]

An order is {"order": "o17", "shop": "s3", "customer": "c9", "amount": 1250, "status": "paid",
"ts": 1795946400000} (amount in cents, ts in epoch ms). The store keeps per `region/shop`:
orders=count(), revenue=sum_int(amount), biggest=max(amount), customers=distinct(customer),
last_order=latest(order). An order of a shop the table does not know has no key: a dead letter
missing_key, as is a record that is no JSON; one without an amount is missing_field. Read it with
`statestore top revenue --by revenue` or `statestore prefix revenue north/`. docs/aggregations.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from pyspark.sql import functions as F

from statestore.conn.kafka import spark_source_options
from statestore.conn.spark import build_session
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.errors import ConfigError, StateStoreError

ORDER = "order string, shop string, customer string, amount bigint, status string, ts bigint"
MEASURES = (
    "orders=count(), revenue=sum_int(amount), biggest=max(amount), customers=distinct(customer), "
    "last_order=latest(order)"
)
# The shops' regions when no --shops file is given.
SHOPS = [(f"s{i}", ("north", "south", "east", "west")[i % 4]) for i in range(12)]


def orders_by_shop(orders, shops):
    """Your own query: the Kafka source's records as orders (cancelled ones left out), each with
    its shop's region. It keeps the source's topic, partition, offset and value (the raw record a
    dead letter shows); the static join and the filter give the same rows whenever a batch is
    read again, which exactly-once needs."""
    parsed = orders.select(
        "topic", "partition", "offset", "value", F.from_json(F.col("value").cast("string"), ORDER).alias("o")
    ).select("topic", "partition", "offset", "value", "o.*")
    kept = parsed.filter(F.coalesce(F.col("status"), F.lit("")) != "cancelled")
    return kept.join(F.broadcast(shops), on="shop", how="left")


def start(spark, args, cassandra: CassandraConfig, kafka: KafkaConfig):
    """Read the topic, run orders_by_shop over it, start the aggregation (AggregationQuery)."""
    from statestore.stream import start_aggregation

    reader = spark.readStream.format("kafka").options(**spark_source_options(kafka)).option("subscribe", args.topic)
    reader = reader.option("startingOffsets", "earliest")
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    if args.shops:
        shops = spark.read.option("header", True).schema("shop string, region string").csv(args.shops)
    else:
        shops = spark.createDataFrame(SHOPS, "shop string, region string")
    return start_aggregation(
        orders_by_shop(reader.load(), shops),
        store=args.store,
        measures=MEASURES,
        key=F.concat(F.col("region"), F.lit("/"), F.col("shop")),  # null for a shop of no region: missing_key
        time="ts",
        checkpoint=args.checkpoint,
        cassandra=cassandra,
        kafka=kafka,
        trigger=args.trigger,
        driver_apply_records=args.driver_apply_records,
        lease_ttl_s=args.lease_ttl,
    )


def parse_args(argv: Sequence[str] | None):
    parser = argparse.ArgumentParser(prog="own_aggregation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", required=True, help="Kafka topic of JSON orders")
    parser.add_argument("--store", required=True, help="aggregate store to keep the measures in")
    parser.add_argument("--checkpoint", required=True, help="Spark checkpoint location")
    parser.add_argument("--shops", help="CSV file with a header shop,region (default: 12 example shops)")
    parser.add_argument("--trigger", default="available-now", help="available-now (default) or an interval: 10s")
    parser.add_argument("--max-offsets-per-trigger", type=int, help="cap on Kafka records per micro-batch")
    parser.add_argument("--driver-apply-records", type=int, default=1000, help="see the stream job (default 1000)")
    parser.add_argument("--lease-ttl", type=float, default=30.0, help="seconds the store's lease outlives its holder")
    for section in (CassandraConfig, KafkaConfig):
        cfg.add_arguments(parser, section)
    args = parser.parse_args(argv)
    return args, cfg.from_args(CassandraConfig, args), cfg.from_args(KafkaConfig, args)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        args, cassandra, kafka = parse_args(argv)
        spark = build_session(f"statestore-own-aggregation-{args.store}")
        start(spark, args, cassandra, kafka).await_termination()
        return 0
    except (StateStoreError, ConfigError) as exc:
        print(f"own_aggregation: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
