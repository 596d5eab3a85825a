"""Key-value stores with codecs: the operations of Kafka Streams' KeyValueStore.

A KeyValueStore wraps one key-value table (raw bytes, statestore.store.tables) with the store's key
and value codecs and the optional read cache; the scans and sizes it shares with the versioned store
live in statestore.store.handle. A None value deletes its key, as in Kafka Streams.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

from statestore.conn.aio import first_row, rows_of
from statestore.core.model import Entry
from statestore.core.retention import expired
from statestore.store.handle import KeyValueHandle
from statestore.store.table_stats import SizeEstimate
from statestore.store.tables.base import entry_from_row

_SAMPLE_ENTRIES = 200


class KeyValueStore(KeyValueHandle):
    """get / put / put_if_absent / put_all / delete / range / reverse_range / all / reverse_all /
    prefix_scan / approximate_num_entries over one partitioned-kv or global-kv store."""

    VERSIONED = False

    # -- point operations ------------------------------------------------------------------------

    def prepare_point_get(self) -> None:
        """Prepare the point get's statement now (a blocking round trip), so that `get_async`,
        awaited on an event loop, never has to."""
        self.table.get_query(self.session, b"")
        self.table.get_many_queries(self.session, [b""])
        self.horizon.prepare()

    def get(self, key: Any) -> Any | None:
        """The value of `key`; None when absent or past the store's retention."""
        raw = self._key(key)
        cutoff = self.horizon.pending()  # the stream time is read beside the entry
        kept = self._cached(raw)
        if kept is not None:
            return self._judged(kept, cutoff())
        entry = self.table.get(self.session, raw)
        return self._remember(raw, entry, cutoff())

    async def get_async(self, key: Any) -> Any | None:
        """`get` for an asyncio caller: the same single query, awaited without a thread."""

        raw = self._key(key)
        kept = self._cached(raw)
        if kept is not None:
            return self._judged(kept, await self.horizon.cutoff_async())
        cutoff, row = await asyncio.gather(
            self.horizon.cutoff_async(),
            first_row(self.session, self.table.get_query(self.session, raw), self.table.profile),
        )
        return self._remember(raw, None if row is None else entry_from_row(row), cutoff)

    async def get_many_async(self, keys: list[Any]) -> list[Any | None]:
        """`get` of each of `keys` for an asyncio caller, in one query per store partition
        (a few per hundred keys) instead of one per key: the HTTP API reads the point gets that
        arrive together this way (statestore.http.coalesce)."""
        raws = [self._key(key) for key in keys]
        cached: dict[bytes, tuple] = {}
        missing = []
        for raw in dict.fromkeys(raws):
            kept = self._cached(raw)
            if kept is not None:
                cached[raw] = kept
            else:
                missing.append(raw)
        queries = self.table.get_many_queries(self.session, missing) if missing else []
        # The stream time is read beside the entries.
        cutoff, *pages = await asyncio.gather(
            self.horizon.cutoff_async(), *(rows_of(self.session, q, self.table.profile) for q in queries)
        )
        answers = {raw: self._judged(kept, cutoff) for raw, kept in cached.items()}
        found = {row.key: entry_from_row(row) for rows in pages for row in rows}
        for raw in missing:
            answers[raw] = self._remember(raw, found.get(raw), cutoff)
        return [answers[raw] for raw in raws]

    def _remember(self, raw: bytes, entry: Entry | None, cutoff: int | None) -> Any | None:
        """The decoded value of a read `entry` (None: absent, or past `cutoff`), kept in the read
        cache if there is one."""
        if entry is None:
            return self._keep(raw, None, None, cutoff)
        return self._keep(raw, self._decode_value(entry.value), entry.time_ms, cutoff)

    def put(self, key: Any, value: Any) -> None:
        """Write `value` under `key`; a None value deletes the key (as in Kafka Streams)."""
        if value is None:
            self.delete(key)
            return
        self.put_all([(key, value)])

    def put_all(self, items: Iterable[tuple[Any, Any]], concurrency: int = 64) -> None:
        """Write every (key, value); None values delete their keys. A key given more than once
        ends with its last value, as in a sequence of puts. Encoding errors are raised before
        anything is written."""
        # One write per key: the writes of one call share a timestamp, so two of them for one
        # key would be settled by Cassandra's tie-break on the value bytes, not by their order.
        last: dict[bytes, bytes | None] = {}
        for key, value in items:
            last[self._key(key)] = None if value is None else self._value(value)
        now_ms = int(time.time() * 1000)
        entries = [Entry(raw, value, None, now_ms) for raw, value in last.items() if value is not None]
        deletions = [raw for raw, value in last.items() if value is None]
        self.table.write_entries(self.session, entries, concurrency, None)
        for raw in deletions:
            self.table.delete(self.session, raw)
        if self.cache is not None:
            for raw in [e.key for e in entries] + deletions:
                self.cache.evict(raw)

    def put_if_absent(self, key: Any, value: Any) -> Any | None:
        """Write unless the key exists (a lightweight transaction); returns the existing
        value, or None when this one was written."""
        raw = self._key(key)
        existing = self.table.put_if_absent(self.session, Entry(raw, self._value(value), None, int(time.time() * 1000)))
        if self.cache is not None:
            self.cache.evict(raw)
        return None if existing is None else self._decode_value(existing.value)

    def delete(self, key: Any) -> Any | None:
        """Delete `key`; returns the value it had (None if absent, or past the store's retention,
        as a get would have said)."""
        raw = self._key(key)
        old = self.table.get(self.session, raw)
        if old is not None:
            self.table.delete(self.session, raw)
        if self.cache is not None:
            self.cache.evict(raw)
        if old is None or expired(old.time_ms, self.horizon.cutoff()):
            return None
        return self._decode_value(old.value)

    # -- size ------------------------------------------------------------------------------------

    def _entries_in(self, estimate: SizeEstimate) -> int:
        """A global store: one entry per Cassandra partition. A partitioned one: the estimated
        bytes over the mean size of a sample of entries."""
        if not self.spec.store_type.partitioned:
            return estimate.partitions  # one entry per Cassandra partition
        sample = [e for _, e in zip(range(_SAMPLE_ENTRIES), self.table.scan_unordered(self.session), strict=False)]
        if not sample:
            return 0
        mean_entry = sum(len(e.key) + len(e.value) + 32 for e in sample) / len(sample)
        return int(estimate.total_bytes / mean_entry)
