"""A paned window store's batch (statestore.stream.batch_apply): its deltas are pane rows, and each
apply task holds one apply-cache bucket of them, as a key-value or window store's tasks do."""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import functions as F

from statestore.core.model import StoreSpec, StoreType
from statestore.core.windows import WindowSpec
from statestore.stream.batch_apply import _bucketed, _deltas

HOPPING = WindowSpec(60_000, 20_000, panes=True)
PANED = StoreSpec("ks", "panes", StoreType.PARTITIONED_WINDOW, 1, windowing=HOPPING)
PER_WINDOW = StoreSpec("ks", "windows", StoreType.PARTITIONED_WINDOW, 1, windowing=WindowSpec(60_000, 20_000))


def _batch(spark, count: int):
    rows = [
        ("t", 0, i, bytearray(f"w{i % 7} v{i % 3}".encode()), datetime.fromtimestamp(i * 7_919 / 1000, UTC))
        for i in range(count)
    ]
    return spark.createDataFrame(rows, "topic string, partition int, offset long, value binary, timestamp timestamp")


def test_a_paned_stores_batch_is_pane_rows_and_a_per_window_stores_is_window_rows(spark):
    batch = _batch(spark, 20)
    assert _deltas(batch, PANED, None).columns == ["word", "delta", "last_ms", "pane_start", "from_start"]
    assert _deltas(batch, PER_WINDOW, None).columns == ["word", "delta", "last_ms", "window_start"]


def test_each_apply_task_of_a_paned_store_holds_one_bucket(spark):
    """The bucket is Spark's hash partitioning of the apply's grouping key (word, pane, from):
    hashed by the word alone, a bucket's rows would be cut across tasks, each opening its file
    (apply_cache.tokens_by_bucket then trusts that bucket at no later batch)."""
    buckets = int(spark.conf.get("spark.sql.shuffle.partitions"))
    deltas = _bucketed(_deltas(_batch(spark, 400), PANED, 100_000), PANED, buckets)
    held = deltas.select(F.spark_partition_id().alias("task"), "bucket").distinct().collect()
    tasks = [row.task for row in held]
    assert len(tasks) == len(set(tasks)) and len(tasks) > 1  # one bucket a task, several tasks
