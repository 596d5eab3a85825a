"""Cassandra, as far as one key-value store's stream sees it: the store's registry row (its
progress, statestore.store.book.registry), the store's table and its dead-letter table.

What matters of the real system and is kept:
- the registry's progress updates mirror registry.begin_batch / record_batch / take_epoch /
  record_topic_id column by column, each conditional on the writer's epoch (registry._fenced:
  StoreFencedError when a newer writer took the store), and are atomic (lightweight transactions);
- the store's rows are written one key at a time (a batch's writes are many statements, so a
  crash can leave a batch half written), each `USING TIMESTAMP` of its batch: a write older than
  the row's last one loses (last write wins per row here; Cassandra decides per cell, which is
  the same for rows written whole as the stream writes them);
- dead letters are rows keyed by (topic, partition, offset, reason): writing one again changes
  nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta

from statestore.core.codecs import millis_of
from statestore.core.errors import StoreFencedError
from statestore.core.model import Entry
from statestore.store.book.registry import BatchPosition, KafkaOffsets, StoreProgress

_EPOCH = datetime(1970, 1, 1)


def moment_of(ms: int) -> datetime:
    """A naive-UTC datetime of epoch ms, as the Cassandra driver returns timestamps."""
    return _EPOCH + timedelta(milliseconds=ms)


def _offsets_text(offsets: KafkaOffsets | None) -> str | None:
    """registry._offsets_text."""
    return None if offsets is None else offsets.as_json()


@dataclass(frozen=True)
class StoredRow:
    """A row of the store's table: the entry and the write timestamp it was written with."""

    entry: Entry
    write_ts: int


@dataclass(frozen=True)
class DeadLetterKey:
    """The primary key of a dead letter (deadletters.create_cql), and the batch that wrote it."""

    partition: int
    offset: int
    reason: str


@dataclass
class FakeCassandra:
    """The registry row of the one store, its table and its dead letters."""

    store: str = "words"
    progress_row: StoreProgress = field(
        default_factory=lambda: StoreProgress(None, None, None, "words", None, 0, None, None, None, None, None)
    )
    rows: dict[bytes, StoredRow] = field(default_factory=dict)
    dead_letters: dict[DeadLetterKey, int] = field(default_factory=dict)  # -> the batch that wrote it

    # --- the registry (statestore.store.book.registry) ---

    def progress(self) -> StoreProgress:
        """registry.progress: a serial read of the store's progress."""
        return self.progress_row

    def take_epoch(self) -> int:
        """registry.take_epoch: the store's next epoch, for a writer that now holds the lease."""
        epoch = (self.progress_row.epoch or 0) + 1
        self.progress_row = replace(self.progress_row, epoch=epoch)
        return epoch

    def _fenced(self, epoch: int | None, what: str, **columns) -> None:
        """registry._fenced: the update, conditional on the store's epoch still being `epoch`."""
        if epoch is not None and self.progress_row.epoch != epoch:
            raise StoreFencedError(
                f"store '{self.store}': this writer (epoch {epoch}) was fenced off while {what}: the store was taken "
                f"over by a newer writer (epoch {self.progress_row.epoch})"
            )
        self.progress_row = replace(self.progress_row, **columns)

    def record_topic_id(self, topic_id: str, epoch: int) -> None:
        """registry.record_topic_id."""
        self._fenced(epoch, "recording its source topic", topic_id=topic_id)

    def begin_batch(self, position: BatchPosition, epoch: int | None) -> None:
        """registry.begin_batch: SET pending_batch_id, pending_ts, offsets (the batch's start),
        pending_offsets (its end), query_id, batch_base, pending_rules (the batch's rules)."""
        self._fenced(
            epoch,
            f"beginning batch {position.batch_id}",
            pending_batch_id=position.batch_id,
            pending_ts=position.write_ts,
            offsets=_offsets_text(position.start),
            pending_offsets=_offsets_text(position.end),
            query_id=position.query_id,
            batch_base=position.batch_base,
            pending_rules=position.rules,
        )

    def record_batch(self, position: BatchPosition, max_event_time_ms: int | None, epoch: int | None) -> None:
        """registry.record_batch: SET last_batch_id, last_ts, offsets (the batch's end),
        max_event_time (only ever growing: a batch with no events, or earlier ones, leaves it)."""
        current = self.progress_row.max_event_time
        if max_event_time_ms is None or (current is not None and millis_of(current) >= max_event_time_ms):
            max_event_time_ms = None if current is None else millis_of(current)
        self._fenced(
            epoch,
            f"recording batch {position.batch_id}",
            last_batch_id=position.batch_id,
            last_ts=position.write_ts,
            offsets=_offsets_text(position.end),
            max_event_time=None if max_event_time_ms is None else moment_of(max_event_time_ms),
            last_batch_at=moment_of(0),
        )

    # --- the store's table and its dead letters ---

    def read_entries(self, keys: list[bytes]) -> dict[bytes, Entry]:
        """The current entries of `keys` (those the store holds)."""
        return {key: self.rows[key].entry for key in keys if key in self.rows}

    def write_entry(self, entry: Entry, write_ts: int) -> None:
        """One key's write, `USING TIMESTAMP write_ts`: lost if the row holds a later write."""
        held = self.rows.get(entry.key)
        if held is None or held.write_ts <= write_ts:
            self.rows[entry.key] = StoredRow(entry, write_ts)

    def write_dead_letter(self, key: DeadLetterKey, batch_id: int) -> None:
        self.dead_letters[key] = batch_id

    def describe_progress(self) -> str:
        row = self.progress_row
        shown = ("last_batch_id", "offsets", "pending_batch_id", "pending_offsets", "pending_ts", "query_id")
        return ", ".join(f"{f.name}={getattr(row, f.name)}" for f in fields(row) if f.name in shown)
