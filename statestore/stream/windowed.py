"""The windowed and sessioned word count's Spark transforms of one micro-batch: (word, window)
deltas or (word, event times) for sessions, and the batch's late records. Pure DataFrame plans,
like statestore.stream.transforms.

Windows come from each record's Kafka timestamp (statestore.core.windows: aligned to the
epoch, [start, end)). A record counts in every window containing its time that is still open
at the stream time the batch started with (the store's largest applied event time, recorded
with the previous batch, so a replay decides the same). A record with words and at least one
closed window is late: it is not counted in the closed ones and becomes a dead letter with
reason `late`. The rules are WindowSpec.starts_of and WindowSpec.closed, stated here again in
Spark SQL so they run in the JVM; tests check the two against each other.

A hopping store kept as panes (WindowSpec.panes) gets one row per word, pane of its record's
time and first open window (`from`) instead of one per open window (pane_deltas): the window
store composes its windows from them (statestore.core.windows, compose_windows).

Sessions: a record is late when it is more than the grace older than that same stream time
(SessionSpec.late); each word's on-time event times go to the apply, which merges them into
the key's sessions (statestore.stream.apply_sessions).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from statestore.core.durations import format_duration
from statestore.core.model import MAX_KEY_BYTES
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.store.book import deadletters
from statestore.stream.apply import UNCOUNTABLE
from statestore.stream.tokenize import words_column
from statestore.stream.transforms import is_countable

# The window start of an UNCOUNTABLE row: it counts the batch's dead letters, in no window.
NO_WINDOW = -1


def _long(value: int):
    return F.lit(value).cast("bigint")


def window_starts(time_ms, windowing: WindowSpec):
    """The starts of every window containing `time_ms` (a bigint column), ascending: the
    Spark SQL form of WindowSpec.starts_of."""
    hop, size = windowing.hop_ms, windowing.size_ms
    last = time_ms - F.pmod(time_ms, _long(hop))
    first = F.greatest(_long(0), last - _long((size - 1) // hop * hop))
    first = F.when(first + _long(size) <= time_ms, first + _long(hop)).otherwise(first)
    return F.when(time_ms < 0, F.array().cast("array<bigint>")).otherwise(F.sequence(first, last, _long(hop)))


def open_starts(starts, windowing: WindowSpec, stream_time: int | Column | None):
    """`starts` without the windows closed at `stream_time`: WindowSpec.closed in Spark SQL.
    A column gives each record its own stream time (validation); where it is null, all are open."""
    if stream_time is None:
        return starts
    now = _stream_time(stream_time)
    size, grace, retention = windowing.size_ms, windowing.grace_ms, windowing.retention_ms
    opened = F.filter(starts, lambda s: ~((s + _long(size + grace) < now) | (s <= now - _long(retention))))
    return F.when(now.isNull(), starts).otherwise(opened)


def _stream_time(stream_time: int | Column) -> Column:
    return stream_time.cast("bigint") if isinstance(stream_time, Column) else _long(stream_time)


def session_on_time(time_ms: Column, sessions: SessionSpec, stream_time: int | Column | None) -> Column:
    """Whether a record at `time_ms` is no more than the grace older than the stream time
    (SessionSpec.late's rule; None, or a null column: every record is on time). Compared as
    DECIMAL(19, 0), as transforms.after_future_limit compares the future limit: the stream time,
    a constant of the batch, is then no long written into Spark's generated code, which would
    be compiled again every batch."""
    if stream_time is None:
        return F.lit(True)
    now = _stream_time(stream_time).cast("decimal(19,0)")
    return now.isNull() | ((time_ms + _long(sessions.grace_ms)).cast("decimal(19,0)") >= now)


def _windowed_records(batch_df, windowing: WindowSpec | SessionSpec, stream_time: int | Column | None):
    """Per record: its words (null when unreadable or too far ahead: transforms.is_countable),
    time, every window and the open ones (sessions: one pseudo-window, open unless the record
    is late)."""
    time_ms = F.unix_millis("timestamp")
    if isinstance(windowing, SessionSpec):
        starts = F.array(time_ms)
        on_time = session_on_time(time_ms, windowing, stream_time)
        opened = F.when(on_time, starts).otherwise(F.array().cast("array<bigint>"))
    else:
        starts = window_starts(time_ms, windowing)
        opened = open_starts(starts, windowing, stream_time)
    return batch_df.select(
        "topic",
        "partition",
        "offset",
        "value",
        F.when(is_countable(batch_df), words_column(F.col("value").cast("string"))).alias("words"),
        time_ms.alias("ts_ms"),
        starts.alias("starts"),
        opened.alias("open"),
    )


def _late():
    """A record with words (the tokenizer may leave empty strings) and a closed window."""
    has_words = F.size(F.filter("words", lambda w: F.length(w) > 0)) > 0
    return has_words & (F.size("open") < F.size("starts"))


def _words(batch_df, windowing: WindowSpec | SessionSpec, stream_time: int | Column | None):
    """(word, ts_ms, open) per word of every record (empty strings left out), plus an
    UNCOUNTABLE word per record that cannot be counted, per late record and per word too long
    for a key."""
    word = F.col("word")
    records = _windowed_records(batch_df, windowing, stream_time)
    tokens = F.coalesce("words", F.array(F.lit(UNCOUNTABLE)))
    tokens = F.when(_late(), F.concat(tokens, F.array(F.lit(UNCOUNTABLE)))).otherwise(tokens)
    words = records.select(F.explode(tokens).alias("word"), "ts_ms", "open").select(
        F.when(F.octet_length(word) > MAX_KEY_BYTES, F.lit(UNCOUNTABLE)).otherwise(word).alias("word"), "ts_ms", "open"
    )
    return words.filter(F.length(word) > 0)


def windowed_deltas(
    batch_df, windowing: WindowSpec | SessionSpec, stream_time: int | Column | None, keep_times: bool = False
):
    """(word, delta, last_ms, window_start) for every countable word in every open window of
    its record, plus UNCOUNTABLE rows (window NO_WINDOW) whose deltas count the messages and
    words statestore.stream.transforms sends to dead letters and the late records, so the
    apply tells whether the batch has dead letters at all (see transforms.batch_deltas)."""
    word = F.col("word")
    in_windows = _words(batch_df, windowing, stream_time).select(
        "word",
        "ts_ms",
        F.explode(F.when(word == F.lit(UNCOUNTABLE), F.array(_long(NO_WINDOW))).otherwise(F.col("open"))).alias(
            "window_start"
        ),
    )
    if keep_times:  # sessions: one group per word, with its times
        return in_windows.groupBy("word").agg(
            F.count("*").alias("delta"),
            F.max("ts_ms").alias("last_ms"),
            F.collect_list(F.when(F.col("window_start") != NO_WINDOW, F.col("ts_ms"))).alias("times"),
        )
    return (
        in_windows.groupBy("word", "window_start")
        .agg(F.count("*").alias("delta"), F.max("ts_ms").alias("last_ms"))
        .select("word", "delta", "last_ms", "window_start")
    )


def pane_deltas(batch_df, windowing: WindowSpec, stream_time: int | Column | None):
    """A paned store's deltas (WindowSpec.panes): (word, delta, last_ms, pane_start, from_start)
    per countable word, pane of its record's time (pane_ms) and first of its record's open
    windows (`from`, element 1 of open_starts: WindowSpec.pane_from in Spark SQL), so a record
    is one row however many windows it counts in, and a partly late one reaches no closed
    window. A record whose windows are all closed counts nowhere. UNCOUNTABLE rows (pane and
    from NO_WINDOW) as in windowed_deltas."""
    word = F.col("word")
    uncountable = word == F.lit(UNCOUNTABLE)
    time_ms = F.col("ts_ms")
    pane = time_ms - F.pmod(time_ms, _long(windowing.pane_ms))
    in_panes = (
        _words(batch_df, windowing, stream_time)
        .filter(uncountable | (F.size("open") > 0))
        .select(
            "word",
            "ts_ms",
            F.when(uncountable, _long(NO_WINDOW)).otherwise(pane).alias("pane_start"),
            F.when(uncountable, _long(NO_WINDOW)).otherwise(F.get(F.col("open"), 0)).alias("from_start"),
        )
    )
    return (
        in_panes.groupBy("word", "pane_start", "from_start")
        .agg(F.count("*").alias("delta"), F.max("ts_ms").alias("last_ms"))
        .select("word", "delta", "last_ms", "pane_start", "from_start")
    )


def session_deltas(batch_df, sessions: SessionSpec, stream_time: int | Column | None):
    """(word, delta, last_ms, times) for every countable word: its on-time event times in the
    batch, ascending (one per occurrence), plus UNCOUNTABLE rows as in windowed_deltas."""
    rows = windowed_deltas(batch_df, sessions, stream_time, keep_times=True)
    return rows.select("word", "delta", "last_ms", F.array_sort("times").alias("times"))


def late_detail(starts, opened, windowing: WindowSpec, stream_time_ms: int, counted: str):
    """A late record's dead-letter detail: how many of its windows (`starts`) had closed (not in
    `opened`) at the stream time; `counted` says what of it was not counted there."""
    grace = format_duration(windowing.grace_ms) if windowing.grace_ms else "no grace"
    return F.format_string(
        f"%d of its %d window(s) had closed at stream time {stream_time_ms} ms ({grace}): {counted} not counted "
        "in them",
        F.size(starts) - F.size(opened),
        F.size(starts),
    )


def late_letter_rows(batch_df, windowing: WindowSpec | SessionSpec, stream_time_ms: int | None):
    """The batch's late records as dead-letter rows (topic, partition, offset, ts_ms, reason,
    detail, raw), like statestore.stream.transforms.dead_letter_rows."""
    if stream_time_ms is None:
        return batch_df.sparkSession.createDataFrame(
            [], "topic string, partition int, offset long, ts_ms long, reason string, detail string, raw binary"
        )
    records = _windowed_records(batch_df, windowing, stream_time_ms).filter(_late())
    if isinstance(windowing, SessionSpec):
        grace = format_duration(windowing.grace_ms) if windowing.grace_ms else "no grace"
        detail = F.lit(
            f"more than the grace ({grace}) older than the stream time {stream_time_ms} ms: not counted in any session"
        )
    else:
        detail = late_detail(F.col("starts"), F.col("open"), windowing, stream_time_ms, "its words were")
    return records.select(
        "topic",
        "partition",
        "offset",
        "ts_ms",
        F.lit(deadletters.LATE).alias("reason"),
        detail.alias("detail"),
        F.col("value").alias("raw"),
    )
