"""The paned window table on the real stack: random pane rows written with write_panes, then every
window-level read (get, fetch, fetch_range, read_split over the table's splits) compared with the
brute force, compose_windows over all the rows of each key. Segments of one minute, so windows
straddle segments; the hop-20s table holds no row in its first segment, whose windows are made of
the second segment's panes only; the hop-25s one has panes of 5 s."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from statestore.conn.cassandra import DDL_PROFILE
from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import EVERYTHING, KeyRange, PaneEntry, StoreSpec, WindowedEntry
from statestore.core.windows import WindowSpec, compose_windows
from statestore.store.tables import window_table_for
from statestore.store.tables.base import Found

LAST = 2**63 - 1
KEYS = [b"a", b"ab", b"b", b"ba", "\u00e9t\u00e9".encode(), b"m", b"\x00x", b"\xff\xfe", b"zz", b"q"]
ABSENT = b"nothing"
TTL_KEY = b"ttl"
# (name, windowing, first pane written): the hop-20s table leaves segment 0 without rows.
LAYOUTS = [
    ("hop20", WindowSpec(60_000, 20_000, segment_ms=60_000, panes=True), 60_000),
    ("hop25", WindowSpec(60_000, 25_000, segment_ms=60_000, panes=True), 0),
]


def _random_rows(windowing: WindowSpec, first_pane: int, seed: int) -> dict[tuple[bytes, int, int], PaneEntry]:
    rng = random.Random(seed)
    panes = range(first_pane, 300_000, windowing.pane_ms)
    rows = {}
    for _ in range(350):
        key, pane = rng.choice(KEYS), rng.choice(panes)
        starts = list(windowing.windows_of_row(pane, 0))
        # Mostly the first window holding the pane or a later open one; now and then past every
        # window (a row that counts nowhere).
        from_ms = starts[-1] + windowing.hop_ms if rng.random() < 0.03 else rng.choice(starts)
        batch = None if rng.random() < 0.05 else rng.randrange(50)
        time_ms = None if rng.random() < 0.05 else pane + rng.randrange(windowing.pane_ms)
        value = encode_long(rng.randrange(-5, 10**6))
        rows[(key, pane, from_ms)] = PaneEntry(key, pane, from_ms, value, batch, time_ms)
    return rows


def _top(values):
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _truth(windowing: WindowSpec, rows) -> dict[tuple[bytes, int], WindowedEntry]:
    """Brute force: every key's windows from all of its pane rows."""

    def merge(parts):
        return (
            encode_long(sum(decode_long(p.value) for p in parts)),
            _top(p.batch_id for p in parts),
            _top(p.time_ms for p in parts),
        )

    truth = {}
    for key in {r.key for r in rows}:
        mine = [(r.pane_ms, r.from_ms, r) for r in rows if r.key == key]
        for start, (value, batch, time_ms) in compose_windows(windowing, mine, merge):
            truth[(key, start)] = WindowedEntry(key, start, value, batch, time_ms)
    return truth


class Paned:
    def __init__(self, table, rows, truth, stored):
        self.table, self.rows, self.truth, self.stored = table, rows, truth, stored

    def windows(self, keys=EVERYTHING, low=0, high=LAST, reverse=False):
        chosen = [e for (k, s), e in self.truth.items() if keys.contains(k) and low <= s <= high]
        return sorted(chosen, key=lambda e: (e.key, e.start_ms), reverse=reverse)


@pytest.fixture(scope="module", params=LAYOUTS, ids=[name for name, _, _ in LAYOUTS])
def paned(request, session, keyspace):
    name, windowing, first_pane = request.param
    spec = StoreSpec(keyspace, f"paned_{name}", "partitioned-window", 4, windowing=windowing)
    table = window_table_for(spec)
    session.execute(table.create_cql(), execution_profile=DDL_PROFILE)
    rows = _random_rows(windowing, first_pane, seed=48)
    table.write_panes(session, list(rows.values()), 8, None)
    # One row carrying a TTL, for the apply's read noting TTLs.
    ttl_pane = first_pane + windowing.pane_ms
    ttl_row = PaneEntry(TTL_KEY, ttl_pane, windowing.windows_of_row(ttl_pane, 0)[0], encode_long(7), 3, ttl_pane)
    session.execute(
        f"INSERT INTO {table.qualified} (partition, segment, key, pane_start, from_start, value, time, batch_id)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) USING TTL 3600",
        (
            table.partition_of(TTL_KEY),
            windowing.segment_of(ttl_pane),
            TTL_KEY,
            ttl_pane,
            ttl_row.from_ms,
            ttl_row.value,
            ttl_pane,
            3,
        ),
    )
    rows[(TTL_KEY, ttl_row.pane_ms, ttl_row.from_ms)] = ttl_row
    yield Paned(table, rows, _truth(windowing, rows.values()), table.segments(session))
    session.execute(f"DROP TABLE {table.qualified}", execution_profile=DDL_PROFILE)


def test_the_pane_rows_read_back_as_written_and_the_ttl_ones_are_noted(session, paned):
    asked = [*paned.rows, (ABSENT, 60_000, 20_000), (KEYS[0], 60_000, 300_000)]
    found = paned.table.read_panes(session, asked, 8)
    assert found == paned.rows
    noted = paned.table.noting_ttl().read_panes(session, asked, 8)
    assert isinstance(noted, Found) and noted == paned.rows
    assert noted.expiring == {k for k in paned.rows if k[0] == TTL_KEY}


def test_get_composes_each_window_from_its_panes(session, paned):
    windowing = paned.table.windowing
    starts = [*range(0, 340_000, windowing.hop_ms), 10_000, 61_000]
    for key in [*KEYS, TTL_KEY, ABSENT]:
        for start in starts:
            assert paned.table.get(session, key, start) == paned.truth.get((key, start)), (key, start)


def _spans(windowing: WindowSpec) -> list[tuple[int, int]]:
    rng = random.Random(7)
    seg = windowing.segment_ms
    fixed = [(0, LAST), (40_000, 130_000), (0, 50_000), (seg - 1, seg + 1), (100_000, 100_000), (130_000, 40_000)]
    return fixed + [tuple(sorted(rng.sample(range(0, 320_000, 5_000), 2))) for _ in range(4)]


def _segment_lists(paned: Paned, low: int, high: int) -> list[list[int]]:
    """The segments a reader passes: the span's (the window starts' span), and those stored
    among the segments the span's windows are made of (a reader asking the table)."""
    first, last = paned.table.segment_span(low, high)
    probed = [s for s in paned.stored if first <= s <= last]
    if high == LAST:
        return [probed, paned.stored]
    windowing = paned.table.windowing
    return [list(range(windowing.segment_of(low), windowing.segment_of(high) + 1)), probed]


def test_fetch_returns_a_keys_windows_by_start_across_segments(session, paned):
    for key in [*KEYS, ABSENT]:
        for low, high in _spans(paned.table.windowing):
            for segments in _segment_lists(paned, low, high):
                for reverse in (False, True):
                    got = list(paned.table.fetch(session, key, segments, low, high, reverse))
                    want = paned.windows(KeyRange(key, key), low, high, reverse)
                    assert got == want, (key, low, high, segments, reverse)


RANGES = [
    EVERYTHING,
    KeyRange(b"ab", b"m"),
    KeyRange(b"ab", b"m", False, False),
    KeyRange(b"b", None),
    KeyRange(None, b"b", True, False),
    KeyRange(b"c", b"c"),
]


def test_fetch_range_returns_windows_by_key_then_start(session, paned):
    for key_range in RANGES:
        got = list(paned.table.fetch_range(session, paned.stored, key_range))
        assert got == paned.windows(key_range), key_range
        got = list(paned.table.fetch_range(session, paned.stored, key_range, reverse=True))
        assert got == paned.windows(key_range, reverse=True), key_range
        for low, high in _spans(paned.table.windowing)[:4]:
            for segments in _segment_lists(paned, low, high):
                for reverse in (False, True):
                    got = list(paned.table.fetch_range(session, segments, key_range, low, high, reverse))
                    assert got == paned.windows(key_range, low, high, reverse), (key_range, low, high, segments)


def _read_splits(session, table, splits, low=0, high=LAST) -> Counter:
    return Counter(e for split in splits for e in table.read_split(session, split, low, high, page_size=50))


def test_the_splits_read_every_window_once(session, paned):
    table, everything = paned.table, paned.windows()
    for count in (1, 3, 7, 100):
        read = _read_splits(session, table, table.splits(count, paned.stored))
        assert max(read.values()) == 1 and sorted(read, key=lambda e: (e.key, e.start_ms)) == everything, count
    for low, high in [(40_000, 130_000), (0, 50_000), (125_000, 240_000)]:
        first, last = table.segment_span(low, high)
        segments = [s for s in paned.stored if first <= s <= last]
        read = _read_splits(session, table, table.splits(4, segments), low, high)
        assert max(read.values(), default=1) == 1
        assert sorted(read, key=lambda e: (e.key, e.start_ms)) == paned.windows(EVERYTHING, low, high)
    key_range = KeyRange(b"ab", b"m", True, False)
    read = _read_splits(session, table, table.splits(5, paned.stored, key_range))
    assert max(read.values()) == 1 and sorted(read, key=lambda e: (e.key, e.start_ms)) == paned.windows(key_range)
    keys = [b"a", b"zz", "\u00e9t\u00e9".encode(), ABSENT]
    read = _read_splits(session, table, table.splits(3, paned.stored, keys=keys), 20_000, 200_000)
    want = [e for e in paned.windows(EVERYTHING, 20_000, 200_000) if e.key in keys]
    assert max(read.values()) == 1 and sorted(read, key=lambda e: (e.key, e.start_ms)) == want


def test_a_reader_finds_windows_made_only_of_panes_past_its_span(session, keyspace):
    """Windows starting in the last segment a reader's span covers can be made of the next
    segment's panes alone: the reader asks the table for its segments (segment_span), over more
    than the 64 segments past which it lists the stored ones instead of trying each."""
    from statestore.store.builder import open_window_store
    from statestore.store.provision import provision_store

    windowing = WindowSpec(60_000, 20_000, segment_ms=60_000, panes=True)
    spec = provision_store(session, StoreSpec(keyspace, "paned_reach", "partitioned-window", 2, windowing=windowing))
    pane = 65 * 60_000  # the first pane of segment 65; segment 64 holds no row
    row = PaneEntry(b"w", pane, pane - 40_000, encode_long(3), 1, pane)
    window_table_for(spec).write_panes(session, [row], 1, None)
    store = open_window_store(session, keyspace, "paned_reach")
    assert store.fetch("w", 0, pane - 1, stream_time_ms=None) == [(pane - 40_000, 3), (pane - 20_000, 3)]
    assert [(w.start_ms, w.value) for w in store.fetch_all(0, pane - 1, stream_time_ms=None)] == [
        (pane - 40_000, 3),
        (pane - 20_000, 3),
    ]
