"""Validation's pure parts: how a store entry is judged against the recount, which batches
replay, and the Great Expectations suite's contents."""

from __future__ import annotations

import pytest

from statestore.maintenance.shared.selection import judge_count
from statestore.maintenance.validate.quality import expectations
from statestore.maintenance.validate.replay import replay_plan

# (stored, stored time, total, last time, recent, expiry applies) -> verdict
CASES = [
    ((5, 100, 5, 100, 5, False), None),
    ((6, 100, 5, 100, 5, False), "count"),
    ((5, 99, 5, 100, 5, False), "time"),
    ((None, None, 5, 100, 5, False), "missing"),
    ((3, 100, None, None, None, False), "unexpected"),
    ((None, None, None, None, None, False), None),
    # After expiry: a key whose input is all older than the cutoff may be gone...
    ((None, None, 5, 100, 0, True), None),
    # ...or restarted from zero: anywhere between the recent occurrences and the total.
    ((2, 100, 5, 100, 2, True), None),
    ((5, 100, 5, 100, 2, True), None),
    ((1, 100, 5, 100, 2, True), "count"),
    ((6, 100, 5, 100, 2, True), "count"),
    ((None, None, 5, 100, 2, True), "missing"),
    # A key with no input before the cutoff is still checked exactly, time included.
    ((4, 100, 5, 100, 5, True), "count"),
    ((5, 90, 5, 100, 5, True), "time"),
]


@pytest.mark.parametrize(("args", "verdict"), CASES)
def test_judge_count(args, verdict):
    assert judge_count(*args) == verdict


@pytest.mark.parametrize(
    ("last", "base", "logged", "wanted", "plan"),
    [
        (9, 0, set(range(10)), 3, [7, 8, 9]),
        (12, 10, {0, 1, 2}, 5, [0, 1, 2]),  # logical ids are Spark's plus the base
        (9, 0, {6, 7, 8, 9}, 5, [7, 8, 9]),  # batch 6's start is batch 5's end: purged
        (9, 0, {5, 6, 7, 9}, 3, []),  # the last batch's start (8) is gone
        (None, 0, {0}, 3, []),
        (9, 0, set(range(10)), 0, []),
    ],
)
def test_replay_plan(last, base, logged, wanted, plan):
    assert replay_plan(last, base, logged, wanted) == plan


def test_suite_checks_columns_keys_counts_sum_and_batches():
    suite = expectations(["partition", "key", "value", "time", "batch_id"], 90, 100, 7)
    kinds = [(e.expectation_type, getattr(e, "column", None)) for e in suite]
    assert ("expect_column_values_to_be_unique", "key") in kinds
    assert ("expect_column_value_lengths_to_be_between", "key") in kinds
    total = next(e for e in suite if e.expectation_type == "expect_column_sum_to_be_between")
    assert (total.min_value, total.max_value) == (90, 100)
    batches = suite[-1]
    assert (batches.column, batches.max_value) == ("batch_id", 7)
    assert len(expectations(["key", "value"], 1, 1, None)) == len(suite) - 1
