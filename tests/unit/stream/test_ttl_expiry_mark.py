"""What the stream records of a table TTL for later runs (apply_cache.ttl_expiry_to_record) and how
the ledger takes a recorded mark (CacheLedger.admits): a TTL removed between two runs still keeps
the second run's cache off until the rows written under it can no longer expire."""

from __future__ import annotations

from statestore.conn.cassandra import TableTtl, schema_mark
from statestore.store.book.registry import TTL_MARK_AHEAD_S, ttl_expiry_to_record
from statestore.stream.apply_cache import CacheLedger


def test_a_ttl_is_recorded_ahead_and_renewed_once_it_comes_within_the_margin():
    assert ttl_expiry_to_record(None, 1_000.0, None) is None and ttl_expiry_to_record(0, 1_000.0, 5.0) is None
    first = ttl_expiry_to_record(60, 1_000.0, None)
    assert first == 1_000.0 + 60 + 2 * TTL_MARK_AHEAD_S
    assert ttl_expiry_to_record(60, 1_000.0 + TTL_MARK_AHEAD_S, first) is None  # still covers this batch's writes
    renewed = ttl_expiry_to_record(60, 1_000.0 + TTL_MARK_AHEAD_S + 1, first)
    assert renewed is not None and renewed > first
    assert ttl_expiry_to_record(600, 1_000.0, first) is None  # a longer TTL the mark still covers
    assert ttl_expiry_to_record(10_000, 1_000.0, first) > first  # one it does not: moved on at once


def test_a_new_run_with_no_ttl_distrusts_the_cache_until_the_recorded_mark():
    ledger = CacheLedger()  # a new run: it never saw the TTL
    assert not ledger.admits(TableTtl(0), 1_000.0, recorded_until_s=1_500.0)
    assert not ledger.admits(TableTtl(None), 1_499.0)  # remembered, even when the next read gives no mark
    assert ledger.admits(TableTtl(0), 1_500.0, recorded_until_s=1_500.0)
    assert CacheLedger().admits(TableTtl(0), 1_000.0, recorded_until_s=None)


def test_a_mark_recorded_while_the_ledger_held_tokens_ends_the_trust_in_them():
    """statestore alter-store records a mark before it sets a TTL, maybe while a batch writes (its
    plan saw neither): that batch's files may hold rows written under the TTL, so no later plan
    trusts them, even once the mark has passed (found by the simulator, seed 100 of --store cache)."""
    ledger = CacheLedger()
    assert ledger.admits(TableTtl(None), 1_000.0)
    ledger.record(4, 2, None, [(0, "t0"), (1, "t1")])  # batch 4's files, a TTL set while it wrote
    assert not ledger.admits(TableTtl(None), 1_010.0, recorded_until_s=9_000.0)  # the mark alter-store recorded
    assert ledger.admits(TableTtl(None), 9_000.0, recorded_until_s=9_000.0)  # the mark passed: the cache again ...
    assert ledger.plan("ks.words", 5, 2, None, fresh=False).expected == {}  # ... but no file of batch 4


def test_a_schema_change_between_two_plans_ends_the_trust_in_every_token():
    """A TTL set by CQL alone after a batch's plan and removed before the next one: no plan sees
    it and no mark is recorded, but the table's schema mark differs from the previous plan's, so
    that batch's files (maybe holding rows written under the TTL) are trusted no more (the
    simulator's ttl-during-batch, seed 13 of --store cache). The same mark keeps the tokens."""
    agreed = frozenset({"v1"})
    before, after = schema_mark(100, agreed), schema_mark(250, frozenset({"v3"}))
    ledger = CacheLedger()
    assert ledger.admits(TableTtl(None, before), 1_000.0)
    ledger.record(4, 2, None, [(0, "t0"), (1, "t1")])
    assert ledger.admits(TableTtl(None, before), 1_010.0)
    assert ledger.plan("ks.words", 5, 2, None, fresh=False).expected == {0: "t0", 1: "t1"}  # nothing changed
    assert ledger.admits(TableTtl(0, after), 1_020.0)  # the cache may serve: a batch that reads ...
    assert ledger.plan("ks.words", 5, 2, None, fresh=False).expected == {}  # ... and trusts no file of batch 4
    ledger.record(5, 2, None, [(0, "u0"), (1, "u1")])
    assert ledger.admits(TableTtl(None, after), 1_030.0)  # the mark of batch 5's plan: trusted again
    assert ledger.plan("ks.words", 6, 2, None, fresh=False).expected == {0: "u0", 1: "u1"}


def test_the_mark_ignores_other_tables_changes_but_not_a_cluster_in_disagreement():
    """Another table created or altered gives the cluster a new schema version but leaves this
    table's write time: the mark is the same, so a shared cluster's DDL costs the cache nothing.
    Nodes that disagree on the schema may hold a change of this table the contacted node has not
    seen: the mark then differs from every mark of a cluster in agreement."""
    assert schema_mark(100, frozenset({"v1"})) == schema_mark(100, frozenset({"v2"}))
    assert schema_mark(100, frozenset({"v1"})) != schema_mark(101, frozenset({"v1"}))
    assert schema_mark(None, frozenset({"v1"})) != schema_mark(100, frozenset({"v1"}))
    split = schema_mark(100, frozenset({"v2", "v3"}))
    assert split != schema_mark(100, frozenset({"v2"})) and split != schema_mark(100, frozenset({"v3"}))
    assert split == schema_mark(100, frozenset({"v3", "v2"}))  # a lasting split (a node down) is one mark
    ledger = CacheLedger()
    assert ledger.admits(TableTtl(0, schema_mark(100, frozenset({"v1"}))), 1_000.0)
    ledger.record(4, 2, None, [(0, "t0"), (1, "t1")])
    assert ledger.admits(TableTtl(0, schema_mark(100, frozenset({"v2"}))), 1_010.0)  # another table's DDL
    assert ledger.plan("ks.words", 5, 2, None, fresh=False).expected == {0: "t0", 1: "t1"}
    ledger.record(5, 2, None, [(0, "u0"), (1, "u1")])
    assert ledger.admits(TableTtl(0, split), 1_020.0)
    assert ledger.plan("ks.words", 6, 2, None, fresh=False).expected == {}  # a change maybe not seen yet
