"""What the store keeps of a batch: its marks in the registry, and its row in the stream log.

The rule it keeps, which makes the apply exactly-once: a batch is recorded as begun (its
position: write timestamp and offsets) before any of its writes, and as done only after all of
them, each as the writer of its epoch (refused once a newer writer took the store). A crash in
between leaves the batch pending, to be finished as a replay of the same position.
"""

from __future__ import annotations

from statestore.store.book import registry
from statestore.store.book.registry import BatchPosition
from statestore.store.book.stream_log import BatchRecord
from statestore.stream.apply import ApplyStats
from statestore.stream.writer import BatchResult, StoreWriter


def begin(writer: StoreWriter, session, position: BatchPosition) -> None:
    """Record the batch as begun, before any of its writes."""
    writer.step(
        "registry begin_batch",
        _recording(writer, position),
        lambda: registry.begin_batch(session, writer.spec, position, writer.epoch),
    )


def done(writer: StoreWriter, session, position: BatchPosition, stats: ApplyStats) -> None:
    """Record the batch as done, after all of its writes: the store's position moves to its end."""
    writer.step(
        "registry record_batch",
        _recording(writer, position),
        lambda: registry.record_batch(session, writer.spec, position, stats.max_time_ms, writer.epoch),
    )


def _recording(writer: StoreWriter, position: BatchPosition) -> str:
    return f"recording batch {position.batch_id} of store {writer.spec.name}"


def batch_record(position: BatchPosition, run_id: str | None, result: BatchResult, seconds: float) -> BatchRecord:
    """What the stream log keeps of a committed batch."""
    stats = result.stats
    times = [t for t in (position.stream_time_ms, stats.max_time_ms) if t is not None]
    return BatchRecord(
        batch_id=position.batch_id,
        spark_batch_id=position.spark_batch_id,
        run_id=run_id,
        keys=stats.keys,
        written=stats.written,
        skipped=stats.skipped,
        words=stats.words,
        dead_letters=result.dead_letters,
        seconds=round(seconds, 3),
        end_offsets=position.end.as_json(),
        max_event_time_ms=max(times) if times else None,  # the store's stream time after the batch
        dead_letter_reasons=result.dead_letter_reasons,
    )
