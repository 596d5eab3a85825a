"""A batch's constants (its future limit, the stream time it began with) are no constants of
Spark's generated code: every batch of the word count runs the code the first batch compiled,
for each store kind. A long constant is written into the code, so each batch had its own code
to compile (the key-value path twice a batch: most of a second of the JVM's time, and the new
code ran cold until the JIT compiled it again). The counts still follow each batch's own
limit and stream time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from statestore.core.windows import SessionSpec, WindowSpec
from statestore.stream.transforms import batch_deltas, with_future_limit
from statestore.stream.windowed import pane_deltas, session_deltas, windowed_deltas

KAFKA = "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, timestampType int"
NOW_MS = 1_795_946_400_000


def _deltas(kind: str, df, stream_time: int):
    if kind == "kv":
        return batch_deltas(df, with_uncountable=True)
    if kind == "window":
        return windowed_deltas(df, WindowSpec(60_000), stream_time)
    if kind == "pane":
        return pane_deltas(df, WindowSpec(60_000, 20_000, panes=True), stream_time)
    return session_deltas(df, SessionSpec(30_000, grace_ms=1_000), stream_time)


@pytest.mark.parametrize("kind", ["kv", "window", "pane", "session"])
def test_each_batch_counts_by_its_own_limit_and_stream_time_with_the_code_the_first_compiled(spark, kind):
    compiled = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    times = (NOW_MS - 5_000, NOW_MS, NOW_MS + 301_000)  # the last one ahead of the first batch's limit
    rows = [
        (None, f"w{i % 3} x".encode(), "t", 0, i, datetime.fromtimestamp(ms / 1000, UTC), 0)
        for i, ms in enumerate(times)
    ]
    frame = spark.createDataFrame(rows, KAFKA).repartition(2)  # a shuffle's rows, as a Kafka batch's: codegen

    def counted(write_ms: int, stream_time: int) -> int:
        df = with_future_limit(frame, write_ms * 1000, 300_000)
        return sum(r.delta for r in _deltas(kind, df, stream_time).collect() if r.word in ("w0", "w1", "w2"))

    first = counted(NOW_MS, NOW_MS - 10_000)
    before = compiled.getCount()
    later = counted(NOW_MS + 2_000, NOW_MS - 3_000)  # another limit and stream time
    assert compiled.getCount() == before
    assert first == 2  # the record 301 s ahead is after the first batch's limit
    # The second batch's limit takes it; for sessions, the first record is now more than the grace old.
    assert later == (2 if kind == "session" else 3)


def test_a_future_records_dead_letter_shows_its_batchs_limit_in_whole_milliseconds(spark):
    from statestore.stream.transforms import dead_letter_rows

    when = datetime.fromtimestamp((NOW_MS + 301_000) / 1000, UTC)
    df = with_future_limit(spark.createDataFrame([(None, b"w", "t", 0, 7, when, 0)], KAFKA), NOW_MS * 1000, 300_000)
    (letter,) = dead_letter_rows(df).collect()
    assert (letter.offset, letter.reason) == (7, "future")
    assert letter.detail.startswith(f"its time is after {NOW_MS + 300_000} ms, its batch's clock plus the tolerance")
