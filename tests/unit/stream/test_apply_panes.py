"""The pane apply (statestore.stream.apply_panes): the replay rule per (key, pane, from) row, the
panes it does not read, and what a bucket file keeps and forgets of pane rows."""

from __future__ import annotations

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import PaneEntry, StoreSpec, StoreType
from statestore.core.windows import WindowSpec
from statestore.store.tables.base import Found
from statestore.stream.apply import Delta
from statestore.stream.apply_cache import BucketCache
from statestore.stream.apply_panes import (
    apply_pane_deltas,
    forget_closed_panes,
    pane_applier,
    pane_cache_key,
    pane_deltas_of,
    pane_row_of,
)

# Windows of 10 s every 5 s, no grace: panes of 5 s; at stream time 21 s the first open window is 15 s.
WINDOWING = WindowSpec(10_000, 5_000, retention_ms=60_000, panes=True)
SPEC = StoreSpec("ks", "panes", StoreType.PARTITIONED_WINDOW, 1, windowing=WINDOWING)


class _Panes:
    """A pane table: rows by (key, pane, from); remembers what each read asked for."""

    def __init__(self, rows: dict | None = None, expiring=()) -> None:
        self.rows = dict(rows or {})
        self.expiring = set(expiring)
        self.asked: list = []

    def read_panes(self, session, rows, concurrency):
        self.asked.extend(rows)
        found = Found()
        found.update({row: self.rows[row] for row in rows if row in self.rows})
        found.expiring.update(row for row in rows if row in self.expiring)
        return found

    def write_panes(self, session, entries, concurrency, write_ts):
        for entry in entries:
            self.rows[(entry.key, entry.pane_ms, entry.from_ms)] = entry


def _row(key: bytes, pane: int, from_ms: int, value: int, batch: int, time_ms: int | None = None) -> PaneEntry:
    return PaneEntry(key, pane, from_ms, encode_long(value), batch, time_ms)


def _values(table: _Panes) -> dict:
    return {row: (decode_long(e.value), e.batch_id, e.time_ms) for row, e in table.rows.items()}


def test_a_pane_cache_key_is_from_then_pane_then_key_so_from_orders_the_file():
    key = pane_cache_key(b"apple", 20_000, 15_000)
    assert key == (15_000).to_bytes(8, "big") + (20_000).to_bytes(8, "big") + b"apple"
    assert pane_row_of(key) == (b"apple", 20_000, 15_000)
    assert sorted([pane_cache_key(b"z", 0, 5_000), pane_cache_key(b"a", 50_000, 0)])[0][:8] == bytes(8)


def test_a_task_row_is_a_delta_keyed_by_its_pane_row_with_its_bucket():
    (deltas,) = list(pane_deltas_of([("pear", 3, 21_000, 20_000, 15_000, 7), ("fig", 1, 9, 0, 0)]))
    assert deltas == [
        Delta(pane_cache_key(b"pear", 20_000, 15_000), 3, 21_000, 7),
        Delta(pane_cache_key(b"fig", 0, 0), 1, 9, None),
    ]


def test_batch_b_skips_the_rows_it_wrote_and_writes_old_plus_delta_to_the_others():
    table = _Panes(
        {
            (b"a", 10_000, 10_000): _row(b"a", 10_000, 10_000, 5, 7, 12_000),
            (b"a", 15_000, 10_000): _row(b"a", 15_000, 10_000, 2, 8, 16_000),  # batch 8 wrote it: a replay
        }
    )
    deltas = [
        Delta(pane_cache_key(b"a", 10_000, 10_000), 3, 13_000),
        Delta(pane_cache_key(b"a", 15_000, 10_000), 4, 17_000),
        Delta(pane_cache_key(b"a", 15_000, 15_000), 1, 18_000),  # another row of that pane
    ]
    stats = apply_pane_deltas(None, SPEC, 8, deltas, 1, 0, table=table)
    assert (stats.keys, stats.written, stats.skipped, stats.read) == (3, 2, 1, 3)
    assert _values(table) == {
        (b"a", 10_000, 10_000): (8, 8, 13_000),
        (b"a", 15_000, 10_000): (2, 8, 16_000),
        (b"a", 15_000, 15_000): (1, 8, 18_000),
    }


def test_panes_after_the_stream_time_are_not_read_and_the_one_holding_it_is():
    table = _Panes({(b"a", 20_000, 15_000): _row(b"a", 20_000, 15_000, 4, 3, 21_000)})
    deltas = [
        Delta(pane_cache_key(b"a", 20_000, 15_000), 1, 24_000),  # pane 20 s holds the stream time 21 s
        Delta(pane_cache_key(b"a", 25_000, 20_000), 1, 25_000),  # after it: the store has no such row
    ]
    apply_pane_deltas(None, SPEC, 4, deltas, 1, 0, stream_time_ms=21_000, table=table)
    assert table.asked == [(b"a", 20_000, 15_000)]
    assert _values(table)[(b"a", 20_000, 15_000)] == (5, 4, 24_000)
    assert _values(table)[(b"a", 25_000, 20_000)] == (1, 4, 25_000)


def _finished(path, fresh: bool, apply) -> str:
    file = BucketCache(str(path), None, fresh=fresh)
    apply(file)
    token = file.finish()
    file.close()
    return token


def test_a_file_opened_forgets_the_rows_from_before_the_first_open_window_and_keeps_the_others(tmp_path):
    """A complete file (the store's first batch) answers an absent row as absent from the store:
    had it forgotten a row a later batch adds to (from at or after the first open window), that
    batch would count it from 0 without a read."""
    table = _Panes()
    first = [
        Delta(pane_cache_key(b"a", 10_000, 10_000), 2, 12_000),  # from 10 s: closed at stream time 21 s
        Delta(pane_cache_key(b"a", 20_000, 15_000), 3, 21_000),  # from 15 s: the first open window
    ]
    token = _finished(
        tmp_path, True, lambda file: apply_pane_deltas(None, SPEC, 0, first, 1, 0, cache=file, table=table)
    )
    file = BucketCache(str(tmp_path), token, fresh=False)
    try:
        assert file.complete
        forget_closed_panes(SPEC, 21_000)(file)
        found, to_read = file.lookup([d.key for d in first])
        assert found[0] is None and found[1] is not None and to_read == []
        again = [Delta(pane_cache_key(b"a", 20_000, 15_000), 1, 22_000)]
        stats = apply_pane_deltas(None, SPEC, 1, again, 1, 0, stream_time_ms=21_000, cache=file, table=table)
    finally:
        file.close()
    assert stats.read == 0
    assert _values(table)[(b"a", 20_000, 15_000)] == (4, 1, 22_000)


def test_a_pane_row_read_with_a_ttl_is_read_again_next_batch(tmp_path):
    apple, pear = (b"apple", 20_000, 15_000), (b"pear", 20_000, 15_000)
    table = _Panes({apple: _row(*apple, 2, 1), pear: _row(*pear, 5, 1)}, expiring=[apple])
    deltas = [Delta(pane_cache_key(*apple), 1, None, 0), Delta(pane_cache_key(*pear), 1, None, 0)]
    token = _finished(
        tmp_path, False, lambda file: apply_pane_deltas(None, SPEC, 2, deltas, 1, 0, cache=file, table=table)
    )
    file = BucketCache(str(tmp_path), token, fresh=False)
    try:
        _, to_read = file.lookup([d.key for d in deltas])
    finally:
        file.close()
    assert to_read == [0]  # pear, read without a TTL, stays vouched for


def test_what_a_task_runs_pickles_for_the_executors():
    """Spark ships the applier and the forget rule to its Python workers by cloudpickle: nothing
    they hold may be a struct.Struct (the forget rule held one and failed every cached batch)."""
    from pyspark import cloudpickle

    from statestore.core.config import CassandraConfig

    cloudpickle.dumps(forget_closed_panes(SPEC, 120_000))
    cloudpickle.dumps(pane_applier(CassandraConfig(), SPEC, 3, 1_000, stream_time_ms=120_000))
