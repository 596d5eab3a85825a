"""Hopping windows as panes (WindowSpec's panes, compose_windows): a pane row per key, pane and
first open window, read back as windows, equals counting every record in each of its open windows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from statestore.core.windows import WindowSpec, compose_windows


def test_hopping_windows_keep_panes_when_asked_and_tumbling_ones_never_do():
    assert WindowSpec(60_000, 20_000, panes=True).panes is True
    assert WindowSpec(60_000, 20_000).panes is False
    assert WindowSpec(60_000).panes is False
    assert WindowSpec(60_000, 60_000, panes=True).panes is False
    assert WindowSpec(60_000, 20_000, panes=True).as_dict()["panes"] is True
    assert WindowSpec(60_000, 25_000).pane_ms == 5_000


def test_a_store_keeps_its_pane_choice_in_its_layout_not_in_equality():
    paned, rows = WindowSpec(60_000, 20_000, panes=True), WindowSpec(60_000, 20_000)
    assert paned == rows
    assert paned.layout != rows.layout


def test_a_pane_row_counts_in_the_open_windows_holding_the_pane():
    w = WindowSpec(60_000, 20_000, panes=True)
    assert list(w.windows_of_row(60_000, 0)) == [20_000, 40_000, 60_000]
    assert list(w.windows_of_row(60_000, 40_000)) == [40_000, 60_000]
    assert list(w.windows_of_row(0, 0)) == [0]
    assert w.pane_from(60_000, None) == 20_000
    # Stream time 140,001: windows starting before 80,001 are closed (no grace); the first open
    # window holding pane 60,000 would start at 100,000, after the pane: all are closed.
    assert w.pane_from(60_000, 140_001) == 100_000
    assert w.pane_from(60_000, 120_000) == 60_000  # window 60,000 ends at 120,000: still open


windowings = st.sampled_from(
    [
        WindowSpec(60_000, 20_000, panes=True),
        WindowSpec(60_000, 20_000, grace_ms=10_000, panes=True),
        WindowSpec(60_000, 25_000, grace_ms=5_000, panes=True),
        WindowSpec(30_000, 10_000, retention_ms=30_000, panes=True),
    ]
)
# (event time, stream time the batch began with), in a few minutes from the epoch.
records = st.lists(st.tuples(st.integers(0, 300_000), st.one_of(st.none(), st.integers(0, 400_000))), max_size=40)


@given(windowing=windowings, batch=records)
def test_windows_composed_from_pane_rows_equal_counting_each_record_in_its_open_windows(windowing, batch):
    truth: dict[int, int] = {}
    rows: dict[tuple[int, int], int] = {}
    for time_ms, stream_time in batch:
        opened = [s for s in windowing.starts_of(time_ms) if not windowing.closed(s, stream_time)]
        for start in opened:
            truth[start] = truth.get(start, 0) + 1
        pane = windowing.pane_of(time_ms)
        first = windowing.pane_from(pane, stream_time)
        assert (first <= pane) == bool(opened)
        if opened:
            assert first == opened[0]
            rows[(pane, first)] = rows.get((pane, first), 0) + 1
    composed = compose_windows(windowing, [(p, f, v) for (p, f), v in rows.items()], sum)
    assert dict(composed) == truth
    low, high = 40_000, 200_000
    span = compose_windows(windowing, [(p, f, v) for (p, f), v in rows.items()], sum, low, high)
    assert dict(span) == {s: v for s, v in truth.items() if low <= s <= high}
