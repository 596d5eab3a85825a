"""The paned window table without I/O: which stores get it, its rows' merge into windows, the
segments a window's panes lie in, and the refusal of single-window writes."""

from __future__ import annotations

import pytest

from statestore.core.codecs import decode_long, encode_long
from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import PaneEntry, StoreSpec, WindowedEntry
from statestore.core.windows import WindowSpec
from statestore.store.tables import PanedWindowTable, PartitionedWindowTable, create_cql_for, window_table_for
from statestore.store.tables.paned_window import merge_panes, windows_of

PANED = WindowSpec(60_000, 20_000, segment_ms=60_000, panes=True)


def _spec(windowing: WindowSpec) -> StoreSpec:
    return StoreSpec("ks", "w", "partitioned-window", 2, windowing=windowing)


def test_a_store_keeping_panes_gets_the_paned_table_and_others_a_row_per_window():
    assert isinstance(window_table_for(_spec(PANED)), PanedWindowTable)
    assert isinstance(window_table_for(_spec(WindowSpec(60_000, 20_000, panes=False))), PartitionedWindowTable)
    assert isinstance(window_table_for(_spec(WindowSpec(60_000))), PartitionedWindowTable)
    assert "PRIMARY KEY ((partition, segment), key, pane_start, from_start))" in create_cql_for(_spec(PANED))
    with pytest.raises(ValueError, match="panes"):
        PanedWindowTable(_spec(WindowSpec(60_000)))


def test_a_window_sums_its_panes_counts_with_the_latest_batch_and_time():
    panes = [
        PaneEntry(b"k", 60_000, 20_000, encode_long(3), 4, 61_000),
        PaneEntry(b"k", 80_000, 40_000, encode_long(-1), None, None),
        PaneEntry(b"k", 100_000, 100_000, encode_long(5), 2, 119_999),  # counts in window 100,000 on
    ]
    assert windows_of(PANED, b"k", panes) == [
        WindowedEntry(b"k", 20_000, encode_long(3), 4, 61_000),
        WindowedEntry(b"k", 40_000, encode_long(2), 4, 61_000),
        WindowedEntry(b"k", 60_000, encode_long(2), 4, 61_000),
        WindowedEntry(b"k", 80_000, encode_long(-1), None, None),
        WindowedEntry(b"k", 100_000, encode_long(5), 2, 119_999),
    ]
    assert [w.start_ms for w in windows_of(PANED, b"k", panes, 40_000, 80_000)] == [40_000, 60_000, 80_000]
    value, batch, time_ms = merge_panes(
        [PaneEntry(b"k", 0, 0, encode_long(2**40)), PaneEntry(b"k", 0, 0, encode_long(1))]
    )
    assert (decode_long(value), batch, time_ms) == (2**40 + 1, None, None)


def test_a_windows_panes_lie_in_its_segment_and_the_ones_after():
    table = PanedWindowTable(_spec(PANED))
    # Window 40,000 is made of panes 40,000 to 80,000: segments 0 and 1.
    assert table.segment_span(40_000, 40_000) == (0, 1)
    assert table.segment_span(0, 0) == (0, 0)
    assert table.segment_span(60_000, 2**63 - 1)[0] == 1
    # Segment 1's panes count in windows starting in segment 0 too: a split holds both.
    assert sorted({s for split in table.splits(8, [1]) for _, s in split.partitions}) == [0, 1]
    assert sorted({s for split in table.splits(8, [3, 5]) for _, s in split.partitions}) == [2, 3, 4, 5]
    assert sum(len(split.partitions) for split in table.splits(3, [1, 2])) == 2 * 3


def test_a_single_window_is_neither_written_nor_deleted():
    table = PanedWindowTable(_spec(PANED))
    with pytest.raises(UnsupportedOperationError, match="panes"):
        table.write(None, [WindowedEntry(b"k", 60_000, encode_long(1))], 1, None)
    with pytest.raises(UnsupportedOperationError, match="panes"):
        table.delete(None, b"k", 60_000)
