"""How the key-value and window tables cut their writes into UNLOGGED batches (tables/base.py):
bounded by rows and bytes, each a power of two long, nothing lost or reordered."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from statestore.core.model import Entry
from statestore.store.tables.base import BATCH_BYTES, write_batches


def _entry(size: int) -> Entry:
    return Entry(b"k", b"v" * size, 1, None)


def test_rows_and_bytes_both_close_a_batch_and_a_large_entry_goes_alone():
    assert [len(b) for b in write_batches([_entry(1)] * 25, 16)] == [16, 8, 1]
    assert [len(b) for b in write_batches([_entry(1)] * 25, 10)] == [8, 8, 8, 1]
    big = _entry(BATCH_BYTES)
    assert [len(b) for b in write_batches([_entry(1), big, _entry(1), _entry(1)], 10)] == [2, 2]
    assert [len(b) for b in write_batches([big, big], 10)] == [1, 1]
    assert list(write_batches([], 10)) == []


@given(sizes=st.lists(st.integers(0, 3 * BATCH_BYTES), max_size=60), rows=st.integers(1, 64))
def test_every_entry_is_written_once_in_order_within_the_bounds(sizes, rows):
    entries = [Entry(str(i).encode(), b"v" * n, i, None) for i, n in enumerate(sizes)]
    batches = list(write_batches(entries, rows))
    assert [e for b in batches for e in b] == entries
    for batch in batches:
        assert 1 <= len(batch) <= rows
        assert len(batch) & (len(batch) - 1) == 0  # a power of two: one prepared statement
        # Only the last entry may take a batch past the byte bound.
        assert sum(len(e.key) + len(e.value) + 24 for e in batch[:-1]) < BATCH_BYTES
