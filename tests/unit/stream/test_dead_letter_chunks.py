"""The driver writes a batch's dead letters in chunks bounded in rows and in bytes
(dead_letters.dead_letter_chunks, pure): a batch of large bad records never sits whole in memory."""

from __future__ import annotations

from statestore.store.book.deadletters import DeadLetter
from statestore.stream.dead_letters import dead_letter_chunks


def _letter(offset: int, raw_bytes: int) -> DeadLetter:
    return DeadLetter("t", 0, offset, None, "invalid_utf8", "d", b"\xff" * raw_bytes)


def test_chunks_hold_at_most_so_many_bytes_and_rows_and_lose_no_letter():
    letters = [_letter(i, n) for i, n in enumerate([400, 400, 400, 50, 50, 50, 50, 50, 50, 2_000, 10])]
    chunks = list(dead_letter_chunks(iter(letters), rows=4, size=1_000))
    assert [d for chunk in chunks for d in chunk] == letters
    assert [[d.kafka_offset for d in chunk] for chunk in chunks] == [[0, 1], [2, 3, 4, 5], [6, 7, 8], [9], [10]]
    # A letter larger than the bound goes alone: it is kept, not dropped.
    assert all(len(chunk) == 1 or sum(len(d.raw) + 1 for d in chunk) <= 1_000 for chunk in chunks)


def test_no_letters_no_chunks():
    assert list(dead_letter_chunks(iter([]))) == []
