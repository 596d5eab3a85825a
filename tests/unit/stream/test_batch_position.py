"""Which Spark batch may be applied to a store (checkpoint.position_problem and
checkpoint_problem, pure): only the store's next batch, or a replay of a batch the store knows
with the very offsets it recorded for it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from statestore.store.book.registry import KafkaOffsets, StoreProgress
from statestore.stream.checkpoint import checkpoint_problem, position_problem, topic_problem
from statestore.stream.position import recorded_done


def _offsets(*ends: int) -> str:
    return json.dumps({"t": {str(p): end for p, end in enumerate(ends)}}, sort_keys=True, separators=(",", ":"))


def _progress(last, pending, offsets, pending_offsets, query="q") -> StoreProgress:
    return StoreProgress(last, None, None, "t", query, 0, offsets, pending, 1, pending_offsets, 1)


# The store finished batch 4, which ended at (40, 40).
DONE = _progress(4, 4, _offsets(40, 40), _offsets(40, 40))
# The store finished batch 4 and began batch 5, which reads (40, 40) to (50, 45).
HALF = _progress(4, 5, _offsets(40, 40), _offsets(50, 45))


def test_the_next_batch_and_exact_replays_pass():
    end = KafkaOffsets.parse
    assert position_problem(DONE, 5, end(_offsets(60, 60))) is None
    assert position_problem(DONE, 4, end(_offsets(40, 40))) is None  # the same batch again
    assert position_problem(HALF, 5, end(_offsets(50, 45))) is None  # finishing the half-written one
    assert position_problem(HALF, 4, end(_offsets(40, 40))) is None  # its checkpoint lost commits/4 only


def test_a_batch_recorded_as_done_is_not_applied_again():
    """Issue 45, item 1: batch 4 run again by a checkpoint restored between offsets/4 and
    commits/4 passes the position check, but must not be recorded as begun again: on HALF that
    would overwrite batch 5's pending record (its offsets and write timestamp)."""
    assert recorded_done(DONE, 4) and recorded_done(HALF, 4)
    assert not recorded_done(HALF, 5)  # begun, never finished: a replay finishes it
    assert not recorded_done(DONE, 5)
    assert not recorded_done(_progress(None, 0, None, _offsets(10, 10)), 0)  # the very first batch, half written


@pytest.mark.parametrize(
    ("progress", "logical", "end", "says"),
    [
        (DONE, 4, _offsets(45, 40), "the store's batch 4 ends at"),  # planned again over more input
        (DONE, 4, _offsets(30, 40), "the store's batch 4 ends at"),  # ... or over less
        (HALF, 5, _offsets(60, 60), "the store's batch 5 ends at"),
        (HALF, 4, _offsets(41, 40), "the store's batch 4 ends at"),
        (DONE, 3, _offsets(30, 30), "rolled back"),
        (DONE, 6, _offsets(70, 70), "ahead of the store's batch 4"),
        (HALF, 6, _offsets(70, 70), "batch 5 was begun and never finished"),
    ],
)
def test_a_batch_planned_over_other_input_or_out_of_turn_is_refused(progress, logical, end, says):
    assert says in position_problem(progress, logical, KafkaOffsets.parse(end))


def test_offsets_compare_as_json_not_as_text():
    spaced = json.dumps({"t": {"1": 40, "0": 40}})
    assert position_problem(DONE, 4, KafkaOffsets.parse(spaced)) is None


def test_a_store_with_no_batches_refuses_a_checkpoint_that_read_input():
    empty = replace(_progress(None, None, None, None, query=None), last_ts=None)  # never held a batch
    assert checkpoint_problem(empty, None, recover=False) is None  # a new checkpoint
    assert checkpoint_problem(empty, "q", recover=False, checkpoint_committed=False) is None  # crashed in batch 0
    assert "holds no batches" in checkpoint_problem(empty, "q", recover=False, checkpoint_committed=True)
    assert "holds no batches" in checkpoint_problem(empty, "q", recover=True, checkpoint_committed=True)
    # Reset (its floor kept as last_ts): a checkpoint that planned a batch before the reset would
    # count from the old store's position (found by the simulator: reset-uncommitted-checkpoint).
    reset = replace(empty, last_ts=1_700_000_000_000_000)
    assert checkpoint_problem(reset, None, recover=False) is None
    assert "planned or read" in checkpoint_problem(reset, "q", recover=True, checkpoint_committed=False)


def test_a_topic_created_again_is_refused_once_the_store_read_it():
    read = _progress(4, 4, _offsets(40, 40), _offsets(40, 40))
    known = StoreProgress(**{**read.__dict__, "topic_id": "id-1"})
    assert topic_problem(known, "t", "id-1") is None
    assert "deleted and created again" in topic_problem(known, "t", "id-2")
    assert topic_problem(known, "t", None) is None  # gone: Spark refuses to read it
    assert topic_problem(read, "t", "id-2") is None  # a store from before ids were kept
    fresh = StoreProgress(**{**_progress(None, None, None, None).__dict__, "topic_id": "id-1"})
    assert topic_problem(fresh, "t", "id-2") is None  # nothing counted yet
