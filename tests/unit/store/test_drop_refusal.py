"""drop-store against a writer paused mid-batch (drop-after-reset-under-paused-writer, found
by the simulator): a reset that clears a batch begun and never recorded records it as the
store's fenced batch (admin.fenced_after_reset), and the drop is refused while it is recorded
(admin.drop_refusal), as while a batch is pending, unless the caller says that writer is
stopped for good. Only such a reset or drop clears it: a later batch does not."""

from __future__ import annotations

from statestore.store import admin
from statestore.store.book.registry import StoreProgress


def _progress(last: int | None, pending: int | None, fenced: int | None = None) -> StoreProgress:
    return StoreProgress(last, None, None, "words", None, 0, None, pending, None, None, None, fenced_batch=fenced)


def test_a_drop_is_refused_while_a_reset_fenced_a_batch_naming_it_and_the_way_out():
    refusal = admin.drop_refusal("words", None, False, fenced=7)
    assert refusal is not None and "its batch 7 was begun by a writer that never recorded it" in refusal
    assert "writer_stopped=True" in refusal and "admin DAG: param writer_stopped" in refusal
    assert admin.drop_refusal("words", None, True, fenced=7) is None
    assert admin.drop_refusal("words", None, False) is None
    assert "batch 8 was begun and never recorded" in admin.drop_refusal("words", 8, False, fenced=7)
    assert admin.drop_refusal("words", 8, True, fenced=7) is None


def test_a_reset_records_the_batch_it_fenced_and_keeps_an_earlier_ones_until_writer_stopped():
    assert admin.fenced_after_reset(_progress(last=3, pending=4), writer_stopped=False) == 4
    assert admin.fenced_after_reset(_progress(last=3, pending=4), writer_stopped=True) is None
    assert admin.fenced_after_reset(_progress(last=4, pending=4), writer_stopped=False) is None  # recorded
    # A later reset with no batch pending (the store's later batches all recorded) keeps it.
    assert admin.fenced_after_reset(_progress(last=9, pending=9, fenced=4), writer_stopped=False) == 4
    assert admin.fenced_after_reset(_progress(last=9, pending=10, fenced=4), writer_stopped=False) == 10
    assert admin.fenced_after_reset(_progress(last=9, pending=9, fenced=4), writer_stopped=True) is None
