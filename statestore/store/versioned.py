"""Versioned key-value stores with codecs: the operations of Kafka Streams' VersionedKeyValueStore.

A VersionedStore keeps every version of a key, each valid over [valid_from, valid_to) in epoch
milliseconds (statestore.store.tables.versioned_base has the rules). get(key) is the current value,
get(key, as_of=t) the value valid at t, history(key) every version oldest first. Scans
(all, range, prefix_scan, ...) read current values, with the same support per layout as the
key-value types: ordered ranges and prefixes on partitioned-versioned, whole-store scans only
on global-versioned (the scans are statestore.store.handle.KeyValueHandle's).

There is no history retention (Kafka's grace period): every put is accepted, however old
its timestamp. Old versions are dropped by maintenance (table.delete_versions). A store's
retention (statestore.core.retention) hides a current value dated before its cutoff from
get and the scans; history and as_of reads show every version, as a history does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from statestore.conn.aio import first_row
from statestore.core.errors import UnsupportedOperationError
from statestore.store.handle import KeyValueHandle
from statestore.store.table_stats import SizeEstimate
from statestore.store.tables.versioned_base import OPEN_END, Version, version_from_row

_SAMPLE_ROWS = 200


@dataclass(frozen=True)
class VersionedRecord:
    """A decoded version: `value` (None only in a history: the key was deleted then), valid
    from `valid_from` (inclusive) to `valid_to` (exclusive; None: still current), epoch ms."""

    value: Any
    valid_from: int
    valid_to: int | None = None

    @property
    def timestamp(self) -> int:
        """Kafka Streams' name for valid_from."""
        return self.valid_from


def check_timestamp(value: Any, what: str = "timestamp") -> int:
    """A version time: whole epoch milliseconds, 0 <= t < 2**63 - 1 (the open end)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} is whole epoch milliseconds (an int), got {value!r}")
    if not 0 <= value < OPEN_END:
        raise ValueError(f"{what} must be between 0 and {OPEN_END - 1} epoch ms, got {value}")
    return value


class VersionedStore(KeyValueHandle):
    """get / get(as_of) / put / delete / history, and all / reverse_all / range / reverse_range /
    prefix_scan / approximate_num_entries over current values, for one partitioned-versioned
    or global-versioned store."""

    VERSIONED = True

    # -- decoding versions ------------------------------------------------------------------------

    def _record(self, version: Version) -> VersionedRecord:
        value = None if version.value is None else self._decode_value(version.value)
        return VersionedRecord(value, version.valid_from, None if version.current else version.valid_to)

    def _live(self, version: Version | None) -> VersionedRecord | None:
        return None if version is None or version.tombstone else self._record(version)

    # -- versioned operations ------------------------------------------------------------------

    def prepare_point_get(self) -> None:
        """Prepare the current-version get's statement now (a blocking round trip), so that
        `get_async`, awaited on an event loop, never has to."""
        self.table.latest_query(self.session, b"")
        self.horizon.prepare()

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        """The current record of `key`, or with `as_of` (epoch ms) the record valid then;
        None if the key had no value (never written, or deleted) at that time."""
        raw = self._key(key)
        if as_of is not None:
            return self._live(self.table.get_as_of(self.session, raw, check_timestamp(as_of, "as_of")))
        cutoff = self.horizon.pending()  # the stream time is read beside the version
        kept = self._cached(raw)
        if kept is not None:
            return self._judged(kept, cutoff())
        version = self.table.get_latest(self.session, raw)
        return self._remember(raw, version, cutoff())

    async def get_async(self, key: Any) -> VersionedRecord | None:
        """`get(key)` (the current record) for an asyncio caller: the same single query, awaited
        without a thread."""

        raw = self._key(key)
        kept = self._cached(raw)
        if kept is not None:
            return self._judged(kept, await self.horizon.cutoff_async())
        cutoff, row = await asyncio.gather(
            self.horizon.cutoff_async(),
            first_row(self.session, self.table.latest_query(self.session, raw), self.table.profile),
        )
        return self._remember(raw, None if row is None else version_from_row(row), cutoff)

    def _remember(self, raw: bytes, version: Version | None, cutoff: int | None) -> VersionedRecord | None:
        """The live record of a read current `version` (None: absent, deleted, or past `cutoff`:
        the store's retention), kept in the read cache if there is one."""
        return self._keep(raw, self._live(version), None if version is None else version.time_ms, cutoff)

    def put(self, key: Any, value: Any, timestamp: int) -> int | None:
        """Add the version of `key` valid from `timestamp` (epoch ms); a None value deletes.

        At an existing version's own valid_from it replaces that version's value; inside a
        version it splits it. Returns the new version's valid_to: None if it is the current
        version (Kafka Streams returns -1 then), else where the next version starts.
        """
        raw = self._key(key)
        data = None if value is None else self._value(value)
        timestamp = check_timestamp(timestamp)
        new = self.table.put_version(self.session, raw, data, timestamp, time_ms=timestamp)
        if self.cache is not None:
            self.cache.evict(raw)
        return None if new.current else new.valid_to

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Delete `key` from `timestamp` on (a tombstone version); returns the record valid at
        `timestamp` before the delete, or None. Versions after `timestamp` stay as they are."""
        raw = self._key(key)
        timestamp = check_timestamp(timestamp)
        before = self._live(self.table.get_as_of(self.session, raw, timestamp))
        self.table.put_version(self.session, raw, None, timestamp, time_ms=timestamp)
        if self.cache is not None:
            self.cache.evict(raw)
        return before

    def history(self, key: Any, from_ms: int | None = None, to_ms: int | None = None) -> Iterator[VersionedRecord]:
        """Every version of `key` valid at some time in [from_ms, to_ms), oldest first,
        tombstones included (value None). Paged: a long history is never held in memory."""
        raw = self._key(key)
        if from_ms is not None:
            check_timestamp(from_ms, "from_ms")
        if to_ms is not None:
            check_timestamp(to_ms, "to_ms")
        return map(self._record, self.table.history(self.session, raw, from_ms, to_ms))

    def put_if_absent(self, key: Any, value: Any) -> Any:
        raise UnsupportedOperationError(
            f"store '{self.name}' is a {self.spec.store_type.value} store: it has no put_if_absent; "
            "use put(key, value, timestamp), which adds a version"
        )

    # -- size ------------------------------------------------------------------------------------

    def _entries_in(self, estimate: SizeEstimate) -> int:
        """Keys with a current value: the estimate scaled by the share of current, non-deleted
        versions in a sample of rows."""
        sample = self.table.sample_rows(self.session, _SAMPLE_ROWS)
        if not sample:
            return 0
        live = sum(1 for v in sample if v.current and not v.tombstone)
        if not self.spec.store_type.partitioned:  # one key per Cassandra partition
            return int(estimate.partitions * live / len({v.key for v in sample}))
        mean_row = sum(len(v.key) + len(v.value or b"") + 48 for v in sample) / len(sample)
        return int(estimate.total_bytes / mean_row * live / len(sample))
