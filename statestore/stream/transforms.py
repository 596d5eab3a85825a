"""The word count's Spark transforms of one micro-batch: words and their deltas, the batch's
version time, and the rows of its dead letters. Pure DataFrame plans (nothing runs until an
action) and one pure Arrow aggregation; nothing here reads or writes a store."""

from __future__ import annotations

from pyspark.sql import functions as F

from statestore.core.model import MAX_KEY_BYTES
from statestore.store.book import deadletters
from statestore.stream.apply import UNCOUNTABLE, with_buckets
from statestore.stream.tokenize import words_column

# The column of a batch's records that holds the latest event time (epoch ms) the batch counts
# (with_future_limit); a record after it is a dead letter `future`. Without the column (or
# where it is null) no time is too far ahead.
FUTURE_LIMIT = "statestore_future_limit_ms"


def future_limit_ms(write_ts: int, max_future_ms: int) -> int:
    """Pure: the latest event time (epoch ms) a batch counts: the batch's clock, its write
    timestamp (epoch micros, fixed on the driver once per batch and reused by a replay, so a
    replay decides the same), plus `max_future_ms`."""
    return write_ts // 1000 + max_future_ms


def is_future_time(time_ms: int | None, limit_ms: int | None) -> bool:
    """Pure: whether a record at `time_ms` is after its batch's `limit_ms` (future_limit_ms):
    is_future's rule for one record (no time or no limit: never)."""
    return time_ms is not None and limit_ms is not None and time_ms > limit_ms


def with_future_limit(batch_df, write_ts: int, max_future_ms: int):
    """`batch_df` with the latest event time its batch counts (future_limit_ms). A record
    further ahead (a producer whose clock is wrong) would otherwise move the store's stream
    time for good. A DECIMAL(19, 0), as after_future_limit compares it: a long constant would
    be written into Spark's generated code wherever the column is carried (a projection under
    the word count's explode), so each batch would compile its code again."""
    return batch_df.withColumn(FUTURE_LIMIT, F.lit(future_limit_ms(write_ts, max_future_ms)).cast("decimal(19,0)"))


def after_future_limit(time_ms):
    """Whether `time_ms` (a bigint column) is after the batch's FUTURE_LIMIT: is_future_time's
    rule in Spark, compared as DECIMAL(19, 0) (which holds every long, exactly). The limit, a
    constant of the batch, is then no long in Spark's generated code (a long constant is written
    into the code, so each batch's code would be new and compiled again, for most of a second
    of the JVM's time, and run cold until the JIT compiled it again) but an object the code
    refers to: the code is the same for every batch, compiled once. Not DECIMAL(20, 0), Spark's
    own type for a long: a comparison of a long cast to that is unwrapped back into longs. A
    detail that shows the limit takes it as text, for the same reason."""
    return time_ms.cast("decimal(19,0)") > F.col(FUTURE_LIMIT).cast("decimal(19,0)")


def is_future(batch_df):
    """True for a record of `batch_df` whose time is after its FUTURE_LIMIT (never null):
    is_future_time's rule as a Spark expression (after_future_limit)."""
    if FUTURE_LIMIT not in batch_df.columns:
        return F.lit(False)
    return F.coalesce(after_future_limit(F.unix_millis("timestamp")), F.lit(False))


def is_countable(batch_df):
    """True for a record whose words count: UTF-8 text (is_readable) at a time not too far ahead."""
    return is_readable() & ~is_future(batch_df)


def dead_letter_rows(batch_df):
    """Messages that cannot be counted at all (null, not UTF-8, a time too far ahead of the
    batch's clock) and messages holding a word too long for a Cassandra key, as (topic,
    partition, offset, ts_ms, reason, detail, raw)."""
    value = F.col("value")
    unreadable = batch_df.select(
        "topic",
        "partition",
        "offset",
        F.unix_millis("timestamp").alias("ts_ms"),
        F.when(value.isNull(), F.lit(deadletters.NULL_VALUE))
        .when(~F.is_valid_utf8(value), F.lit(deadletters.INVALID_UTF8))
        .when(is_future(batch_df), F.lit(deadletters.FUTURE))
        .alias("reason"),
        value.alias("raw"),
        (F.col(FUTURE_LIMIT) if FUTURE_LIMIT in batch_df.columns else F.lit(None)).cast("string").alias("limit"),
    ).filter(F.col("reason").isNotNull())
    unreadable = unreadable.select(
        "topic",
        "partition",
        "offset",
        "ts_ms",
        "reason",
        F.when(F.col("reason") == deadletters.NULL_VALUE, F.lit("the message has no value"))
        .when(
            F.col("reason") == deadletters.FUTURE,
            F.format_string(
                "its time is after %s ms, its batch's clock plus the tolerance (--max-future): nothing of it was "
                "counted and it moved no stream time",
                F.col("limit"),
            ),
        )
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
        batch_df.filter(is_countable(batch_df))
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


# What the driver fetches of a batch's dead letters at a time (statestore.stream.dead_letters
# fetch_groups): a bound in bytes of raw records and details, and one in rows (each row costs
# Python objects too).
DEAD_LETTER_FETCH_BYTES = 16 * 1024 * 1024
DEAD_LETTER_FETCH_ROWS = 20_000


def is_readable():
    """True for a message whose value is UTF-8 text (the one rule of what can be counted)."""
    return F.col("value").isNotNull() & F.is_valid_utf8("value")


def batch_words(batch_df, with_uncountable: bool = False):
    """(word, timestamp): one row per countable word of the batch, with its record's Kafka time.

    `with_uncountable`: plus one row under statestore.stream.apply.UNCOUNTABLE per message
    without UTF-8 text or at a time too far ahead, and per word over the key limit (what
    dead_letter_rows finds). The apply then tells whether the batch has dead letters at all,
    so the usual batch, which has none, runs no job of its own to find out.
    """
    value, word = F.col("value"), F.col("word")
    tokens = F.when(is_countable(batch_df), words_column(value.cast("string"))).otherwise(F.array(F.lit(UNCOUNTABLE)))
    words = batch_df.select(F.explode(tokens).alias("word"), "timestamp").select(
        F.when(F.octet_length(word) > MAX_KEY_BYTES, F.lit(UNCOUNTABLE)).otherwise(word).alias("word"), "timestamp"
    )
    keep = F.length(word) > 0
    if not with_uncountable:
        keep = keep & (word != F.lit(UNCOUNTABLE))
    return words.filter(keep)


def batch_deltas(batch_df, with_uncountable: bool = False):
    """(word, delta, last_ms) for every countable word of the batch: how often it occurs and
    its records' latest Kafka time (epoch ms). `with_uncountable`: see batch_words."""
    return (
        batch_words(batch_df, with_uncountable)
        .groupBy("word")
        .agg(F.count("*").alias("delta"), F.max(F.unix_millis("timestamp")).alias("last_ms"))
    )


def word_times(batch_df, buckets: int | None):
    """batch_words as (word, ms[, bucket]): what the driver collects of a small batch to make
    its deltas itself (arrow_deltas), without shuffling every word by key. `buckets`: the
    apply cache's."""
    return with_buckets(
        batch_words(batch_df, with_uncountable=True).select("word", F.unix_millis("timestamp").alias("ms")), buckets
    )


def arrow_deltas(words):
    """batch_deltas's aggregation over a pyarrow Table of word_times: (word, delta, last_ms
    [, bucket]), as the executors' path gets them from Spark (the same count and latest time)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = ["word", "bucket"] if "bucket" in words.column_names else ["word"]
    grouped = words.group_by(keys, use_threads=False).aggregate(
        [("ms", "count", pc.CountOptions(mode="all")), ("ms", "max")]
    )
    columns = [grouped["word"], grouped["ms_count"], grouped["ms_max"]] + [grouped[k] for k in keys[1:]]
    return pa.Table.from_arrays(columns, names=["word", "delta", "last_ms", *keys[1:]])


def batch_version_ms(batch_df) -> int | None:
    """The batch's largest Kafka record timestamp (epoch ms): where versioned stores' new
    versions start. The same records give the same time, so a replay writes the same versions.
    A record too far ahead of the batch's clock (is_future) counts nowhere, so it is left out."""
    return batch_df.filter(~is_future(batch_df)).agg(F.max(F.unix_millis("timestamp"))).first()[0]
