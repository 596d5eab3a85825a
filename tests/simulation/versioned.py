"""The versioned store kind in the simulator (issue 45): the key-value kind's protocol (the same
machine, driver, registry, lease and epochs, paused drivers, registry timeouts, resets,
set-retention, crashes, replays, checkpoint restores, settings changed between runs and the
operator events: relayout, drop-store, reads at a weak level) over a partitioned-versioned word
count, each batch's rows decided by the real statestore.stream.apply.plan_versions (plan_latest
per key) from the keys' current versions.

The batch's version time is transforms.batch_version_ms's rule over its records: the largest
record time that is not too far ahead of the batch's future limit (a record without a value
counts, as the real rule filters on is_future only); a replay reads the same records, so it
decides the same time. A key's change (one or two rows of its one partition) is one logged
batch: it lands whole, and the driver may crash after any key's change.

A version row is stored in the fake's key-value rows, so every operator event and the weak
reads act on versions as they do on entries: the row's key is the word, a zero byte and its
valid_to (8 bytes, big-endian), its value valid_from (8 bytes) then the count. (At one write
timestamp Cassandra merges valid_from and value cell by cell; the fake merges the two as one
cell, by the larger: rows of one batch written twice are the same rows, so this differs only if
a replay planned other rows at the same timestamp.)

The invariant, beside the key-value kind's over each key's current version (its count and time
the truth of the input its recorded batches cover, the unfinished batch's allowance, the dead
letters): each key's versions are consistent (each valid_from before its valid_to, each ending
where the next begins, the last one current, OPEN_END) and each version holds the key's count
and time after the batch it is tagged with (docs/stores.md: "each batch writes a new version of
every word it changed", updated in place when its time is not after the current version's
start), by the same truth: a closed version is the current one some batch left, later closed.
Not checked: a version's count against the records up to its valid_from: the stream promises
versions by batch, not by record time (late records are counted into the current version).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from itertools import pairwise
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from statestore.core.codecs import decode_long
from statestore.core.model import OPEN_END, Entry, Version
from statestore.core.retention import cutoff_ms
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.store.tables.versioned_base import RowWrite
from statestore.stream.apply import plan_versions
from statestore.stream.transforms import future_limit_ms, is_future_time
from tests.simulation.driver import Step, StreamJob, batch_deltas
from tests.simulation.fake_cassandra import FakeCassandra, StoredRow
from tests.simulation.fake_kafka import Record
from tests.simulation.machine import WORDS, BatchProtocolMachine
from tests.simulation.truth import COMMITTED, Tally, Truth, Violations, _counted, uncountable_reason

SEPARATOR = b"\x00"


def row_key(key: bytes, valid_to: int) -> bytes:
    """The fake row of a key's version ending at `valid_to`."""
    return key + SEPARATOR + valid_to.to_bytes(8, "big")


def version_entry(version: Version) -> Entry:
    """A version as the fake's row: keyed by (key, valid_to), valid_from before the value."""
    return Entry(
        row_key(version.key, version.valid_to),
        version.valid_from.to_bytes(8, "big") + version.value,
        version.batch_id,
        version.time_ms,
    )


def version_of(entry: Entry) -> Version:
    """The version a fake row holds (version_entry's inverse)."""
    key, valid_to = entry.key[:-9], int.from_bytes(entry.key[-8:], "big")
    valid_from = int.from_bytes(entry.value[:8], "big")
    return Version(key, entry.value[8:], valid_from, valid_to, entry.batch_id, entry.time_ms)


def versions_by_key(rows: dict[bytes, StoredRow]) -> dict[bytes, list[Version]]:
    """Every key's versions, oldest first."""
    keys: dict[bytes, list[Version]] = {}
    for row in rows.values():
        version = version_of(row.entry)
        keys.setdefault(version.key, []).append(version)
    return {key: sorted(versions, key=lambda v: v.valid_to) for key, versions in sorted(keys.items())}


def version_ms_of(records: list[Record], limit_ms: int | None) -> int | None:
    """transforms.batch_version_ms: the batch's largest record time not too far ahead (None:
    no such record)."""
    return max((r.time_ms for r in records if not is_future_time(r.time_ms, limit_ms)), default=None)


class VersionedStreamJob(StreamJob):
    """driver.StreamJob whose store is partitioned-versioned (see the module doc)."""

    @classmethod
    def protocol_faults(cls) -> bool:
        """The lease, paused drivers and registry timeouts are modelled: this apply's registry
        calls go through `_retried`; the reset and operator events act on the version rows."""
        return True

    def apply_batch(self, records: list[Record], position: BatchPosition, write_order: int) -> Iterator[Step]:
        """StreamJob.apply_batch with apply.apply_deltas' versioned branch: the current versions
        read (table.read_latest), plan_versions at the batch's version time, each key's change
        written as one batch (write_rows)."""
        max_future = position.max_future_ms
        batch_id, write_ts = position.batch_id, position.write_ts
        limit = future_limit_ms(write_ts, max_future)
        yield from self._retried("registry begin_batch", lambda: self.cassandra.begin_batch(position, self.epoch))
        yield Step("begin", f"batch {batch_id} begun (write_ts {write_ts}, limit {limit})", position, max_future)

        deltas, uncountable = batch_deltas(records, limit)
        version_ms = version_ms_of(records, limit)  # batch_apply._applier, once for every executor
        read = self.cassandra.read_entries([row_key(d.key, OPEN_END) for d in deltas])
        current = {version.key: version for version in map(version_of, read.values())}
        cutoff = cutoff_ms(position.retention_ms, position.stream_time_ms)
        changes, _ = plan_versions(current, deltas, batch_id, version_ms, cutoff)
        if write_order:  # the keys' batches go out concurrently: they land in any order
            random.Random(write_order).shuffle(changes)
        for number, change in enumerate(changes, 1):
            self._write_change(change, write_ts)
            what = (
                f"batch {batch_id}: key {change[-1].version.key.decode()!r} written from {version_ms} "
                f"({number} of {len(changes)})"
            )
            yield Step("write", what, position, max_future)

        if uncountable:
            yield from self.write_dead_letters(records, limit, position, max_future)

        latest = max((d.time_ms for d in deltas), default=None)  # ApplyStats' max_time_ms
        record = lambda: self.cassandra.record_batch(position, latest, self.epoch)  # noqa: E731
        yield from self._retried("registry record_batch", record)
        yield Step("record", f"batch {batch_id} recorded, ending at {position.end.as_json()}", position, max_future)

    def _write_change(self, change: list[RowWrite], write_ts: int) -> None:
        """One key's change, its rows in one logged batch of the key's partition: all land."""
        for row in change:
            self._write_entry(version_entry(row.version), write_ts)


class VersionedTruth(Truth):
    """truth.Truth over each key's current version, and each key's versions (module doc)."""

    def violations(self, cassandra: FakeCassandra) -> Violations:
        by_key = versions_by_key(cassandra.rows)
        current = {
            key: StoredRow(versions[-1].entry(), 0)
            for key, versions in by_key.items()
            if versions[-1].valid_to == OPEN_END
        }
        found = super().violations(replace(cassandra, rows=current))
        problems = [*found.counts, *self._version_problems(cassandra, by_key)]
        return replace(found, counts=problems)

    def _after_each_batch(self, cassandra: FakeCassandra) -> dict[int, dict[bytes, tuple[int, int | None]]]:
        """Each recorded batch's state after it (key -> count, latest time), by batch id, and
        the unfinished batch's (its records the allowance counts), as Truth.violations computes
        the state after the last."""
        progress = cassandra.progress()
        topic = self.topic.as_of(progress.topic_id)
        covered = topic.of(KafkaOffsets.parse_stored(progress.offsets))
        by_batch: dict[int, Tally] = {}
        for record in topic.records(COMMITTED):
            if record.offset < covered.get(record.partition, 0) and record.coordinates in self.fate:
                fate = self.fate[record.coordinates]
                by_batch.setdefault(self.decided_by[record.coordinates], Tally()).add(record, fate)
        after: dict[int, dict[bytes, tuple[int, int | None]]] = {}
        state: dict[bytes, tuple[int, int | None]] = {}
        stream_time = None
        for index, batch in enumerate(self.history):
            stream_time = _counted(state, by_batch.get(index, Tally()), self.retention_of.get(batch), stream_time)
            after[batch[0]] = dict(state)
        unfinished = progress.unfinished_batch
        rule = None if unfinished is None else self.rule_of.get((unfinished, progress.pending_ts))
        if rule is not None:
            pending = Tally()
            end = topic.of(KafkaOffsets.parse_stored(progress.pending_offsets))
            for record in topic.read(covered, end, COMMITTED):
                pending.add(record, uncountable_reason(record, progress.pending_ts, rule))
            with_pending = dict(state)
            _counted(with_pending, pending, self.retention_of.get((unfinished, progress.pending_ts)), stream_time)
            after[unfinished] = with_pending
        return after

    def _version_problems(self, cassandra: FakeCassandra, by_key: dict[bytes, list[Version]]) -> list[str]:
        """Each key's versions: contiguous, the last current, each the state after its batch."""
        problems: list[str] = []
        after = self._after_each_batch(cassandra)
        for key, versions in by_key.items():
            shown = ", ".join(_version(v) for v in versions)
            if versions[-1].valid_to != OPEN_END:
                problems.append(f"key {key.decode()!r}: no current version (versions {shown})")
            for older, newer in pairwise(versions):
                if older.valid_to != newer.valid_from:
                    problems.append(f"key {key.decode()!r}: versions overlap or leave a gap ({shown})")
            for version in versions:
                if version.valid_from >= version.valid_to:
                    problems.append(f"key {key.decode()!r}: version {_version(version)} is empty")
                if version.current:
                    continue  # Truth.violations compared it (with the retention at read)
                state = after.get(version.batch_id)
                if state is None:
                    problems.append(f"key {key.decode()!r}: version {_version(version)}'s batch is not recorded")
                    continue
                want = state.get(key, (0, None))
                have = (decode_long(version.value), version.time_ms)
                if have != want:
                    problems.append(
                        f"key {key.decode()!r}: version {_version(version)} holds {have[0]} (time {have[1]}), "
                        f"the truth after batch {version.batch_id} {want[0]} (time {want[1]})"
                    )
        return problems


def _version(version: Version) -> str:
    end = "open" if version.current else version.valid_to
    return f"[{version.valid_from}, {end}) batch {version.batch_id}"


class VersionedProtocolMachine(BatchProtocolMachine):
    """BatchProtocolMachine over a partitioned-versioned word count."""

    job_class: ClassVar[type[StreamJob]] = VersionedStreamJob

    def __init__(self) -> None:
        super().__init__()
        self.truth = VersionedTruth(self.world.topic)

    @precondition(lambda self: self.job is not None)
    @rule(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), after_ms=st.sampled_from((0, 1, 1_000)),
          order=st.integers(0, 3))  # fmt: skip
    def steady_batch(self, words: list[str], after_ms: int, order: int) -> None:
        """`after_ms` later a record of `words`, and the batch that reads it, nothing failing:
        the words' versions batch after batch (after 0 ms: the current version rewritten in
        place, as late data is)."""
        self.produce(0, words, False, 0, after_ms)
        self._run(self.job.trigger(order), None)
