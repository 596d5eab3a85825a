"""The apply cache's rules of trust: the driver's ledger (pure) and a bucket's LMDB file."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from statestore.conn.cassandra import TableTtl
from statestore.core.model import Entry
from statestore.stream.apply_cache import BucketCache, CacheLedger, batch_cache_plan, bucket_expression, trust_on_open
from statestore.stream.plan import entry_of, record_of

KEYS = [b"alpha", b"beta", b"gamma"]


def _ledger_after_batch(batch: int, outside_writes: int | None = 7) -> CacheLedger:
    ledger = CacheLedger()
    ledger.record(batch, 4, outside_writes, [(0, "t0"), (3, "t3")])
    return ledger


def test_the_ledger_trusts_only_the_previous_batch_with_nothing_in_between():
    ledger = _ledger_after_batch(5)
    assert ledger.plan("ks.s", 6, 4, 7, fresh=False).expected == {0: "t0", 3: "t3"}
    assert ledger.plan("ks.s", 7, 4, 7, fresh=False).expected == {}  # a batch in between
    assert ledger.plan("ks.s", 5, 4, 7, fresh=False).expected == {}  # a replay of the same batch
    assert ledger.plan("ks.s", 6, 8, 7, fresh=False).expected == {}  # other buckets
    assert ledger.plan("ks.s", 6, 4, 9, fresh=False).expected == {}  # an expiry ran in between
    running = ledger.plan("ks.s", 6, 4, -9, fresh=True)  # one is running
    assert (running.store, running.buckets, running.expected, running.fresh) == ("ks.s", 4, {}, False)
    ledger.forget()
    assert ledger.plan("ks.s", 6, 4, 7, fresh=False).expected == {}  # a failed batch


def test_no_cache_while_the_table_has_a_ttl_nor_for_that_long_after():
    ledger = CacheLedger()
    assert ledger.admits(TableTtl(0), 100.0) and ledger.admits(TableTtl(None), 100.0)
    assert not ledger.admits(TableTtl(30), 100.0)  # rows can expire under the cache's feet
    assert not ledger.admits(TableTtl(0), 129.0)  # the TTL was removed, but rows written under it live on
    assert ledger.admits(TableTtl(0), 130.0)
    assert (
        not ledger.admits(TableTtl(5), 131.0)
        and not ledger.admits(TableTtl(0), 135.9)
        and ledger.admits(TableTtl(0), 136.0)
    )


def test_a_fresh_store_may_start_complete_files():
    assert CacheLedger().plan("ks.s", 0, 4, None, fresh=True).fresh is True
    assert bucket_expression(4) == "pmod(hash(word), 4)"
    assert bucket_expression(4, ("word", "window_start")) == "pmod(hash(word, window_start), 4)"


def test_a_bucket_two_tasks_reported_is_trusted_by_neither():
    """Two tasks of one batch that shared a bucket's file: the second emptied what the first
    wrote, so neither token may be expected at the next batch (the others still are)."""
    ledger = CacheLedger()
    ledger.record(5, 4, None, [(0, "a"), (1, "b"), (0, "c"), (2, "d")])
    assert ledger.plan("ks.s", 6, 4, None, fresh=False).expected == {1: "b", 2: "d"}


def _records(entries):
    return [(entry.key, record_of(entry)) for entry in entries]


def _found(keys, stored) -> dict:
    """A lookup's records as the entries they hold, by key (keys it had none for left out)."""
    return {key: entry_of(key, record) for key, record in zip(keys, stored, strict=True) if record is not None}


def _finished(path, entries, expected=None, fresh=False) -> str:
    cache = BucketCache(str(path), expected, fresh)
    try:
        cache.remember(_records(entries))
        return cache.finish()
    finally:
        cache.close()


@pytest.fixture
def file(tmp_path):
    return tmp_path / "bucket"


def test_a_file_is_trusted_with_the_token_of_its_last_finished_task(file):
    token = _finished(file, [Entry(b"alpha", b"\x01", 3, 100)])
    trusted = BucketCache(str(file), token, fresh=False)
    stored, to_read = trusted.lookup(KEYS)
    trusted.close()
    assert _found(KEYS, stored) == {b"alpha": Entry(b"alpha", b"\x01", 3, 100)}
    assert to_read == [1, 2]  # not complete: absent keys are read (their positions)

    # Any other token (another executor finished the bucket last) empties the file.
    _finished(file, [Entry(b"beta", b"\x02", 4, None)])
    stranger = BucketCache(str(file), token, fresh=False)
    assert stranger.lookup(KEYS) == ([None, None, None], [0, 1, 2])
    stranger.close()


def test_a_task_that_dies_before_finishing_leaves_a_file_nobody_trusts(file):
    token = _finished(file, [Entry(b"alpha", b"\x01", 3, None)])
    dying = BucketCache(str(file), token, fresh=False)
    dying.remember(_records([Entry(b"alpha", b"\x09", 4, None)]))
    dying.close()  # no finish: the task failed after (some of) its writes
    again = BucketCache(str(file), token, fresh=False)
    assert again.trusted is False and again.lookup([b"alpha"]) == ([None], [0])
    again.close()


def test_a_complete_file_answers_absent_keys_without_a_read(file):
    token = _finished(file, [Entry(b"alpha", b"\x01", 0, None)], fresh=True)
    complete = BucketCache(str(file), token, fresh=False)
    stored, to_read = complete.lookup(KEYS)
    complete.close()
    assert set(_found(KEYS, stored)) == {b"alpha"} and to_read == []
    # Completeness is lost with trust: an untrusted file starts incomplete (unless fresh).
    stranger = BucketCache(str(file), "other", fresh=False)
    assert stranger.complete is False
    stranger.close()


def test_entries_keep_their_batch_and_time_even_when_unset_and_long_keys_are_always_read(file):
    long_key = b"w" * 600  # over LMDB's key limit (511 bytes)
    kept = [Entry(b"alpha", b"\x01\x02", None, None), Entry(b"beta", b"", 5, 0), Entry(long_key, b"\x03", 1, 9)]
    token = _finished(file, kept, fresh=True)
    complete = BucketCache(str(file), token, fresh=False)
    keys = [b"alpha", b"beta", long_key]
    stored, to_read = complete.lookup(keys)
    complete.close()
    assert _found(keys, stored) == {b"alpha": kept[0], b"beta": kept[1]}
    assert to_read == [2]  # the long key, even from a complete file


def test_files_no_plan_will_trust_again_are_swept_once_per_batch(tmp_path):
    from statestore.stream.apply_cache import SWEEP_EVERY, is_stale, sweep_stale

    def finished(bucket: int) -> str:
        cache = BucketCache(str(tmp_path / f"ks.s-4-{bucket}"), None, fresh=True)
        cache.remember([(b"k", b"v")])
        token = cache.finish()
        cache.close()
        return token

    kept, moved = finished(0), finished(1)  # bucket 1 then ran on another executor
    in_use = BucketCache(str(tmp_path / "ks.s-4-2"), None, fresh=True)  # a task holds it: no token
    for bucket in (0, 1, 2):
        os.utime(tmp_path / f"ks.s-4-{bucket}" / "data.mdb", (1_000, 1_000))
    ledger = CacheLedger()
    ledger.record(SWEEP_EVERY - 1, 4, None, [(0, kept), (1, "the other executor's token")])
    plan = ledger.plan("ks.s", SWEEP_EVERY, 4, None, fresh=False)
    just_done = finished(3)  # a task of this very batch finished it: no plan has seen its token
    other_store = BucketCache(str(tmp_path / "ks.t-4-1"), None, fresh=True)
    other_store.finish()
    other_store.close()
    os.utime(tmp_path / "ks.t-4-1" / "data.mdb", (1_000, 1_000))

    assert sweep_stale(plan, str(tmp_path)) == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["ks.s-4-0", "ks.s-4-2", "ks.s-4-3", "ks.t-4-1"]
    assert sweep_stale(plan, str(tmp_path)) == 0  # once per directory per batch
    assert sweep_stale(ledger.plan("ks.s", SWEEP_EVERY + 1, 4, None, fresh=False), str(tmp_path)) == 0  # no sweep
    in_use.close()
    assert just_done and moved
    assert not is_stale(None, [], 0.0, 1.0) and not is_stale("t", ["t"], 0.0, 1.0)
    assert not is_stale("t", [], 2.0, 1.0) and is_stale("t", ["u"], 0.0, 2.0)
    assert not is_stale("t", ["u"], 0.5, 1.0)  # within the file clock's slack of the plan


def test_forgetting_below_a_bound_drops_exactly_the_keys_before_it(file):
    from statestore.stream.apply_windows import window_cache_key

    starts = [0, 59_999, 60_000, 60_001, 2**40]
    keys = [window_cache_key(word, start) for start in starts for word in (b"a", b"\xff" * 40)]
    token = _finished(file, [Entry(key, b"\x01", 1, None) for key in keys])
    cache = BucketCache(str(file), token, fresh=False)
    try:
        assert cache.forget_below(window_cache_key(b"", 60_000)) == 4  # starts 0 and 59,999, both keys
        stored, _ = cache.lookup(keys)
        kept = [key for key, record in zip(keys, stored, strict=True) if record is not None]
        assert kept == keys[4:]
        assert cache.forget_below(window_cache_key(b"", 0)) == 0
        assert cache.forget_below(window_cache_key(b"", 2**62)) == 6
        assert cache.lookup(keys)[0] == [None] * len(keys)
    finally:
        cache.close()


def test_a_file_another_task_opened_in_between_is_neither_trusted_nor_complete(file):
    """Two tasks holding rows of one bucket (two Python workers): the first clears the token it
    trusted, the second opens before the first takes its working transaction (and, finding no
    token, empties the file). The first must not go on trusting what it decided at opening."""
    token = _finished(file, [Entry(b"alpha", b"\x01", 3, None)], fresh=True)
    first = BucketCache(str(file), token, fresh=False, hold=False)
    assert first.trusted and first.complete
    second = (
        "import sys; from statestore.stream.apply_cache import BucketCache; "
        "c = BucketCache(sys.argv[1], sys.argv[2], fresh=True); "
        "assert (c.trusted, c.complete) == (False, True); c.close()"
    )
    subprocess.run([sys.executable, "-c", second, str(file), token], check=True, timeout=60)
    first.hold()
    try:
        assert (first.trusted, first.complete) == (False, False)
        assert first.lookup([b"alpha", b"beta"]) == ([None, None], [0, 1])  # both read from Cassandra
    finally:
        first.close()


def test_the_batch_plan_records_a_ttl_mark_and_asks_for_buckets_and_emptiness_only_when_it_plans():
    """batch_cache_plan, the driver's decision BatchApplier.cache_plan makes its I/O around (and
    the simulator its fakes): a TTL is recorded with the cache off too, and no plan is made."""

    def never() -> int:
        raise AssertionError("asked though no plan is made")

    mark, plan = batch_cache_plan(None, "ks.s", 3, never, None, None, True, TableTtl(60), 1_000.0, never)
    assert plan is None and mark == 1_000.0 + 60 + 7_200
    mark, plan = batch_cache_plan(CacheLedger(), "ks.s", 3, never, None, None, True, TableTtl(60), 1_000.0, never)
    assert plan is None and mark is not None
    mark, plan = batch_cache_plan(
        CacheLedger(), "ks.s", 0, lambda: 4, None, None, False, TableTtl(None), 1_000.0, lambda: True
    )
    assert mark is None and plan.buckets == 4 and plan.fresh and plan.expected == {}
    _, plan = batch_cache_plan(
        _ledger_after_batch(2), "ks.s", 3, lambda: 4, 7, None, True, TableTtl(None), 1_000.0, never
    )
    assert plan.expected == {0: "t0", 3: "t3"} and not plan.fresh


def test_a_file_is_trusted_only_with_the_expected_token_and_complete_as_it_was_or_fresh():
    assert trust_on_open("t", "t", True, False) == (True, True)
    assert trust_on_open("t", "t", False, True) == (True, False)
    assert trust_on_open("t", "u", True, False) == (False, False)
    assert trust_on_open(None, "t", True, True) == (False, True)  # emptied, complete at a store's first batch
    assert trust_on_open("t", None, True, False) == (False, False)
