"""Writing a batch's dead letters, from the driver: what it read from Kafka and could not count.

Only a batch whose apply counted something it could not count (ApplyStats.uncountable) runs
this, which is rare. The rule it keeps: the driver never holds more than a bound in bytes (and
one in rows) of a batch's bad records, however many the batch has: it fetches them in groups
that Spark SQL cuts to that bound (fetch_groups), one group at a time, and writes each in chunks
bounded the same way (dead_letter_chunks), rather than starting Python workers on every executor.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from pyspark import StorageLevel
from pyspark.sql import Window
from pyspark.sql import functions as F

from statestore.core.model import StoreSpec
from statestore.store.book import deadletters
from statestore.stream.transforms import DEAD_LETTER_FETCH_BYTES, DEAD_LETTER_FETCH_ROWS, dead_letter_rows
from statestore.stream.windowed import late_letter_rows

_DEAD_LETTER_CHUNK = 500
_DEAD_LETTER_BYTES = 16 * 1024 * 1024


def write_dead_letters(
    session,
    batch_df,
    spec: StoreSpec,
    batch_id: int,
    stream_time_ms: int | None = None,
    *,
    write_ts: int | None = None,
    fetch_bytes: int = DEAD_LETTER_FETCH_BYTES,
    write=deadletters.write,
    rows=None,
) -> Counter[str]:
    """Write the batch's dead letters; returns how many of each reason. `stream_time_ms`: the
    stream time the batch started with (window and session stores), recorded with each letter.
    `write_ts`: the batch's write timestamp, which they are written with (deadletters.write).
    The driver holds one group of at most `fetch_bytes` (fetch_groups) at a time; `write`
    writes one chunk. `rows`: the batch's dead-letter rows as its input stage made them, its
    late records included (JSON records: json_input.dead_letter_rows, and on a window store
    aggregates.late_letter_rows, judged by their event time); None: the word count's text
    lines' (dead_letter_rows, and on a window or session store the records late by their
    Kafka time, windowed.late_letter_rows)."""
    if rows is None:
        rows = dead_letter_rows(batch_df)
        if spec.windowing is not None:
            rows = rows.unionByName(late_letter_rows(batch_df, spec.windowing, stream_time_ms))
    written: Counter[str] = Counter()
    for group in fetch_groups(rows, fetch_bytes):
        letters = (
            deadletters.DeadLetter(
                r.topic,
                r.partition,
                r.offset,
                r.ts_ms,
                r.reason,
                r.detail,
                None if r.raw is None else bytes(r.raw),
                batch_id,
                stream_time_ms,
            )
            for r in group
        )
        for chunk in dead_letter_chunks(letters, size=min(fetch_bytes, _DEAD_LETTER_BYTES)):
            write(session, spec.keyspace, spec.name, chunk, write_ts=write_ts)
            written.update(d.reason for d in chunk)
        del group, letters  # the next group is fetched only once this one is let go
    return written


_WEIGHT, _BY_BYTES, _BY_ROWS = "_dl_weight", "_dl_by_bytes", "_dl_by_rows"


def fetch_groups(
    rows, fetch_bytes: int = DEAD_LETTER_FETCH_BYTES, fetch_rows: int = DEAD_LETTER_FETCH_ROWS
) -> Iterator[list]:
    """`rows` (dead_letter_rows) fetched to the driver in groups of at most `fetch_bytes` of raw
    records and details and at most `fetch_rows` rows each; a record larger than half the byte
    bound comes alone (it is kept: Kafka's message size bounds it). Every row comes once.

    Usually one aggregate and one collect: a batch's dead letters fit the bound. Past it, each
    row's place is weighed per Kafka partition in offset order (a window function, on the
    executors): its group is the half-bound stretch where its bytes start and the half-bound
    stretch of its rank, so a group holds under two halves of either. The rows so marked are
    kept on the executors, their few group keys go to the driver, and each group is one collect
    there. Spark's own partitions could not give that bound: they are cut by rows, not bytes."""
    weight = F.coalesce(F.octet_length("raw"), F.lit(0)) + F.coalesce(F.octet_length("detail"), F.lit(0))
    weighed = rows.withColumn(_WEIGHT, weight)
    size = weighed.agg(F.count(F.lit(1)).alias("n"), F.coalesce(F.sum(_WEIGHT), F.lit(0)).alias("b")).first()
    if size.n == 0:
        return
    if size.b <= fetch_bytes and size.n <= fetch_rows:
        yield weighed.drop(_WEIGHT).collect()
        return
    half_bytes, half_rows = max(1, fetch_bytes // 2), max(1, fetch_rows // 2)
    order = Window.partitionBy("topic", "partition").orderBy("offset", "reason", "detail")
    rank = F.row_number().over(order) - 1
    before = F.sum(_WEIGHT).over(order.rowsBetween(Window.unboundedPreceding, Window.currentRow)) - F.col(_WEIGHT)
    marked = weighed.select(
        "*",
        F.when(F.col(_WEIGHT) > half_bytes, -1 - rank).otherwise(F.floor(before / half_bytes)).alias(_BY_BYTES),
        F.floor(rank / half_rows).alias(_BY_ROWS),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        keys = marked.select("topic", "partition", _BY_BYTES, _BY_ROWS).distinct().collect()
        for key in sorted(keys):
            match = (
                (F.col("topic") == key[0])
                & (F.col("partition") == key[1])
                & (F.col(_BY_BYTES) == key[2])
                & (F.col(_BY_ROWS) == key[3])
            )
            yield marked.filter(match).drop(_WEIGHT, _BY_BYTES, _BY_ROWS).collect()
    finally:
        marked.unpersist()


def dead_letter_chunks(
    letters: Iterable[deadletters.DeadLetter], rows: int = _DEAD_LETTER_CHUNK, size: int = _DEAD_LETTER_BYTES
) -> Iterator[list[deadletters.DeadLetter]]:
    """Pure: `letters` in chunks of at most `rows` letters and, past their first letter, at
    most `size` bytes of raw records and details: a driver holds one chunk at a time, and a
    batch of large records (up to Kafka's message size each) does not fill its memory."""
    chunk: list[deadletters.DeadLetter] = []
    held = 0
    for letter in letters:
        weight = len(letter.raw or b"") + len(letter.detail or "")
        if chunk and (len(chunk) >= rows or held + weight > size):
            yield chunk
            chunk, held = [], 0
        chunk.append(letter)
        held += weight
    if chunk:
        yield chunk
