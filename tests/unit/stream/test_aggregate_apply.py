"""The aggregate stage's apply without services: a fake table, the replay-safe merge, its
figures, the crash switch's half-write, the dead letters' count, and the settings' checks."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from statestore.core import config as cfg
from statestore.core.aggregation import AggregateSpec
from statestore.core.config import StreamConfig
from statestore.core.errors import ConfigError, StoreMismatchError
from statestore.core.model import Entry, StoreSpec
from statestore.core.windows import WindowSpec
from statestore.store.tables.base import Found
from statestore.stream import aggregates, faults
from statestore.stream.apply_cache import BucketCache
from statestore.stream.batch_apply import cacheable
from statestore.stream.job import _refuse_other_values, json_input_of

SPEC = AggregateSpec.parse("n=count(), total=sum_int(amount), last=latest(pos)")
STORE = StoreSpec("ks", "agg", "partitioned-kv", 2, value_codec=SPEC.value_format)


class FakeTable:
    def __init__(self):
        self.rows: dict[bytes, Entry] = {}
        self.writes: list[list[Entry]] = []

    def read_entries(self, session, keys, concurrency):
        return {k: self.rows[k] for k in keys if k in self.rows}

    def write_entries(self, session, entries, concurrency, write_ts):
        self.writes.append(list(entries))
        self.rows.update({e.key: e for e in entries})


@pytest.fixture
def table(monkeypatch):
    fake = FakeTable()
    monkeypatch.setattr(aggregates, "table_for", lambda spec: fake)
    return fake


def _row(key, records, time_ms, n, total, last):
    return (key, records, time_ms, n, total, last)


def _deltas(*rows):
    return [aggregates.delta_of(row, SPEC) for row in rows]


def test_a_partials_row_becomes_a_delta_whatever_arrow_gives():
    latest = {"time_ms": 5, "partition": 1, "offset": 9, "v0": '"x"'}  # Arrow's struct: a dict
    (delta,) = _deltas(_row("k", 3, 5, 3, Decimal(12), latest))
    assert delta.key == b"k" and delta.records == 3 and delta.time_ms == 5
    assert SPEC.finish(delta.accumulators) == {"n": 3, "total": 12, "last": "x"}


def test_apply_merges_into_what_is_stored_and_a_replay_changes_nothing(table):
    first = _deltas(_row("a", 2, 10, 2, Decimal(5), None), _row("b", 1, 20, 1, Decimal(-1), None))
    stats = aggregates.apply_aggregates(None, STORE, SPEC, 1, first, 4, 1000)
    assert (stats.keys, stats.written, stats.skipped, stats.read, stats.words, stats.max_time_ms) == (2, 2, 0, 2, 3, 20)
    second = _deltas(_row("a", 1, 15, 1, Decimal(2**62), None))
    aggregates.apply_aggregates(None, STORE, SPEC, 2, second, 4, 2000)
    replay = aggregates.apply_aggregates(None, STORE, SPEC, 2, second, 4, 2000)
    assert (replay.written, replay.skipped) == (0, 1)
    values = {k: SPEC.codec.decode(e.value) for k, e in table.rows.items()}
    assert values[b"a"]["n"] == 3 and values[b"a"]["total"] == 5 + 2**62
    assert values[b"b"] == {"n": 1, "total": -1, "last": None}
    assert table.rows[b"a"].batch_id == 2 and table.rows[b"a"].time_ms == 15


def test_the_crash_switch_writes_half_of_the_batchs_entries_then_kills(table, monkeypatch):
    monkeypatch.setenv(faults.ENV, "kill-mid-write:3")

    class Killed(Exception):
        pass

    def kill(signum):
        raise Killed

    monkeypatch.setattr(faults, "_signal_job", kill)
    deltas = _deltas(*(_row(f"k{i}", 1, i, 1, Decimal(1), None) for i in range(4)))
    with pytest.raises(Killed):
        aggregates.apply_aggregates(None, STORE, SPEC, 3, deltas, 4, 3000)
    assert [len(w) for w in table.writes] == [2]


def test_the_null_keys_records_come_back_as_uncountable_and_reach_no_applier():
    rows = pa.table({"key": ["a", None], "records": [2, 5], "time_ms": [1, 9]})
    seen = []

    def applier(rows_in):
        seen.extend(rows_in)
        yield aggregates.ApplyStats(keys=len(seen))

    stats = aggregates.run_on_driver(rows, applier)
    assert seen == [("a", 2, 1)] and (stats.keys, stats.uncountable) == (1, 5)


def test_the_apply_cache_serves_every_aggregate_store_but_versions():
    """Key-value, window and session aggregate stores keep their accumulators in the cache."""
    assert cacheable(STORE)
    assert cacheable(StoreSpec("ks", "words", "partitioned-kv", 2))
    windowed = StoreSpec(
        "ks", "w", "partitioned-window", 2, value_codec=SPEC.value_format, windowing=WindowSpec(60_000)
    )
    assert cacheable(windowed)
    assert not cacheable(StoreSpec("ks", "v", "partitioned-versioned", 2))


class CountingTable(FakeTable):
    """FakeTable counting the keys read; `expiring` keys are read as carrying a TTL (a Found)."""

    def __init__(self, expiring=()):
        super().__init__()
        self.read_keys: list[bytes] = []
        self.expiring = set(expiring)

    def read_entries(self, session, keys, concurrency):
        self.read_keys += keys
        found = Found()
        found.update(super().read_entries(session, keys, concurrency))
        found.expiring = {k for k in found if k in self.expiring}
        return found


def _cached(table, path, batch_id, deltas, expected, fresh=False):
    """One task's apply of `deltas` with its bucket's file at `path`; the file's new token."""
    file = BucketCache(str(path), expected, fresh)
    try:
        stats = aggregates.apply_aggregates(
            None, STORE, SPEC, batch_id, deltas, 4, batch_id * 1000, cache=file, table=table
        )
        return stats, file.finish()
    finally:
        file.close()


def test_a_trusted_file_vouches_for_the_accumulators_and_the_batch_reads_nothing(tmp_path):
    """Batch 1 on a fresh (complete) file reads nothing and keeps what it wrote; batch 2, its
    token expected, merges into the file's records without a read: the same values as an
    uncached apply. An untrusted file (another token) reads every key again."""
    table, plain = CountingTable(), FakeTable()
    first = _deltas(_row("a", 2, 10, 2, Decimal(5), None), _row("b", 1, 20, 1, Decimal(-1), None))
    second = _deltas(_row("a", 1, 15, 1, Decimal(2**62), None), _row("c", 1, 16, 1, Decimal(1), None))
    stats, token = _cached(table, tmp_path / "bucket", 1, first, None, fresh=True)
    assert stats.read == 0 and table.read_keys == []
    stats, token = _cached(table, tmp_path / "bucket", 2, second, token)
    assert stats.read == 0 and table.read_keys == []
    for batch_id, deltas in ((1, first), (2, second)):
        aggregates.apply_aggregates(None, STORE, SPEC, batch_id, deltas, 4, batch_id * 1000, table=plain)
    assert table.rows == plain.rows and SPEC.codec.decode(table.rows[b"a"].value)["total"] == 5 + 2**62
    stats, _ = _cached(table, tmp_path / "bucket", 3, second, "another token")
    assert stats.read == 2 and (stats.written, stats.skipped) == (2, 0)


def test_a_key_read_carrying_a_ttl_is_not_kept_so_the_next_batch_reads_it_again(tmp_path):
    """remember_unless_expiring: the file would vouch for a row that may expire unseen."""
    table = CountingTable(expiring={b"a"})
    table.rows[b"a"] = Entry(b"a", SPEC.pack(SPEC.identity()), 0, 5)
    deltas = _deltas(_row("a", 1, 10, 1, Decimal(1), None), _row("b", 1, 10, 1, Decimal(1), None))
    _, token = _cached(table, tmp_path / "bucket", 1, deltas, None)
    table.read_keys.clear()
    _cached(table, tmp_path / "bucket", 2, _deltas(_row("a", 1, 11, 1, Decimal(1), None)), token)
    assert table.read_keys == [b"a"]


def test_an_existing_store_with_other_values_is_refused_naming_both():
    other = AggregateSpec.parse("n=count()").value_format
    with pytest.raises(StoreMismatchError, match=r"keeps aggregate:n=count\(\); this job would write aggregate:n="):
        _refuse_other_values(StoreSpec("ks", "agg", "partitioned-kv", 2, value_codec=other), SPEC.value_format)
    with pytest.raises(StoreMismatchError, match="keeps word counts"):
        _refuse_other_values(StoreSpec("ks", "agg", "partitioned-kv", 2), SPEC.value_format)
    _refuse_other_values(STORE, SPEC.value_format)  # the same measures: accepted


BASE = {"topic": "t", "store": "s", "checkpoint": "/tmp/cp"}


def _stream(**overrides) -> StreamConfig:
    return cfg.resolve(StreamConfig, env={}, overrides={**BASE, **overrides})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"input_format": "json", "key": "user"}, "needs --aggregate"),
        ({"input_format": "json", "aggregate": "n=count()"}, "needs a key"),
        ({"input_format": "json", "aggregate": "n=count()", "key": "u", "key_expr": "record:u"}, "needs a key"),
        ({"aggregate": "n=count()", "key": "u"}, "--aggregate, --key need --input-format json"),
        (
            {"input_format": "json", "aggregate": "n=count()", "key": "u", "store_type": "partitioned-session"},
            "--session-gap",
        ),
        ({"input_format": "json", "aggregate": "n=count()", "key": "u", "store_type": "global-versioned"}, "key-value"),
        (
            {"input_format": "json", "aggregate": "n=count()", "key": "u", "store_type": "partitioned-window"},
            "--window",
        ),
        ({"input_format": "json", "aggregate": "n=counted()", "key": "u"}, "measure n: unknown aggregation"),
        ({"input_format": "json", "aggregate": "n=count()", "key": "a b"}, "'a b' is not a JSON field"),
        ({"input_format": "xml"}, "use text or json"),
    ],
)
def test_the_settings_refuse_what_cannot_aggregate(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _stream(**overrides)


def test_json_settings_from_the_environment_make_the_input_stage():
    stream = cfg.resolve(
        StreamConfig,
        env={
            "STATESTORE_TOPIC": "t",
            "STATESTORE_STORE": "s",
            "STATESTORE_CHECKPOINT": "/tmp/cp",
            "STATESTORE_INPUT_FORMAT": "json",
            "STATESTORE_AGGREGATE": "n = count(),total=sum_int(amount)",
            "STATESTORE_KEY": "shop, user.id",
            "STATESTORE_TIME_FIELD": "ts",
        },
    )
    records = json_input_of(stream)
    assert records.aggregate.text == "n=count(), total=sum_int(amount)"
    assert (records.key_fields, records.key_expr, records.time_field) == (("shop", "user.id"), None, "ts")
    assert json_input_of(_stream()) is None  # text lines: the word count
