"""Writing a batch's dead letters, from the driver: what it read from Kafka and could not count.

Only a batch whose apply counted something it could not count (ApplyStats.uncountable) runs
this, which is rare. The rule it keeps: the driver never holds a whole batch of bad records.
It streams them one Spark partition at a time, the partitions sized in bytes and rows
(transforms.spread_dead_letters), and writes them in chunks bounded the same way
(dead_letter_chunks), rather than starting Python workers on every executor.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from statestore.core.model import StoreSpec
from statestore.store.book import deadletters
from statestore.stream.transforms import dead_letter_rows, spread_dead_letters
from statestore.stream.windowed import late_letter_rows

_DEAD_LETTER_CHUNK = 500
_DEAD_LETTER_BYTES = 16 * 1024 * 1024


def write_dead_letters(
    session, batch_df, spec: StoreSpec, batch_id: int, stream_time_ms: int | None = None
) -> Counter[str]:
    """Write the batch's dead letters; returns how many of each reason. Window stores: late
    records too, by the stream time the batch started with (`stream_time_ms`)."""
    rows = dead_letter_rows(batch_df)
    if spec.windowing is not None:
        rows = rows.unionByName(late_letter_rows(batch_df, spec.windowing, stream_time_ms))
    rows = spread_dead_letters(rows)
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
        for r in rows.toLocalIterator()
    )
    written: Counter[str] = Counter()
    for chunk in dead_letter_chunks(letters):
        deadletters.write(session, spec.keyspace, spec.name, chunk)
        written.update(d.reason for d in chunk)
    return written


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
