"""Key-value stores with codecs: the operations of the seed library's KeyValueStore.

A KeyValueStore wraps one store type's table (raw bytes, statestore.stores) with the store's
key and value codecs and the optional read cache. Constructing one does no I/O; `create()` is
the schema step. Scans page through the table and never hold it in memory.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.cache import CacheOptions, ReadCache
from statestore.cassandra import DDL_PROFILE
from statestore.codecs import Codec, decode_stored
from statestore.errors import UnsupportedOperationError, ValueTooLargeError
from statestore.options import TableOptions
from statestore.stores import table_for
from statestore.stores.base import EVERYTHING, Entry, KeyRange, StoreSpec, check_key
from statestore.table_stats import size_estimate

_log = logging.getLogger(__name__)
# Cassandra's native protocol frames are 256 MiB at most; values far below that are sane.
MAX_VALUE_BYTES = 16 * 1024 * 1024
_SAMPLE_ENTRIES = 200


class KeyValueStore:
    """get / put / put_if_absent / put_all / delete / range / reverse_range / all / reverse_all /
    prefix_scan / approximate_num_entries over one partitioned-kv or global-kv store."""

    def __init__(
        self,
        session,
        spec: StoreSpec,
        key_codec: Codec,
        value_codec: Codec,
        *,
        table_options: TableOptions | None = None,
        create_table: bool = True,
        dml_profile: object = EXEC_PROFILE_DEFAULT,
        ddl_profile: object = DDL_PROFILE,
        count_all: bool = False,
        cache: CacheOptions | None = None,
    ) -> None:
        if spec.store_type.versioned:
            raise UnsupportedOperationError(
                f"store '{spec.name}' is {spec.store_type.value}: open it as a versioned store"
            )
        self.session = session
        self.spec = spec
        self.key_codec = key_codec
        self.value_codec = value_codec
        self.table_options = table_options or TableOptions()
        self.create_table = create_table
        self.count_all = count_all
        self.ddl_profile = ddl_profile
        self.table = table_for(spec, dml_profile)
        self.cache = ReadCache(cache) if cache is not None else None

    @property
    def name(self) -> str:
        return self.spec.name

    def create(self) -> KeyValueStore:
        """The schema step: register the store and create its table (unless table creation
        is off, then the table must exist). Safe when many workers run it at once."""
        from statestore.provision import provision_store

        provision_store(
            self.session,
            self.spec,
            options=self.table_options,
            create_table=self.create_table,
            dead_letters=False,
            ddl_profile=self.ddl_profile,
        )
        return self

    # -- codecs ------------------------------------------------------------------------------

    def _key(self, key: Any) -> bytes:
        return check_key(self.key_codec.encode(key))

    def _value(self, value: Any) -> bytes:
        data = self.value_codec.encode(value)
        if len(data) > MAX_VALUE_BYTES:
            raise ValueTooLargeError(
                f"value of {len(data)} bytes for store '{self.name}' is over the {MAX_VALUE_BYTES}-byte "
                "limit: split it or store a reference to it"
            )
        return data

    def decode_entry(self, entry: Entry) -> tuple[Any, Any]:
        """The (key, value) a stored entry holds, decoded with the store's codecs."""
        return decode_stored(self.key_codec, entry.key, self.name, "key"), self._decode_value(entry.value)

    def _decode_value(self, data: bytes) -> Any:
        return decode_stored(self.value_codec, data, self.name)

    # -- point operations ------------------------------------------------------------------------

    def prepare_point_get(self) -> None:
        """Prepare the point get's statement now (a blocking round trip), so that `get_async`,
        awaited on an event loop, never has to."""
        self.table.get_query(self.session, b"")

    def get(self, key: Any) -> Any | None:
        raw = self._key(key)
        hit, value = self._cached(raw)
        if hit:
            return value
        return self._remember(raw, self.table.get(self.session, raw))

    async def get_async(self, key: Any) -> Any | None:
        """`get` for an asyncio caller: the same single query, awaited without a thread."""
        from statestore.aio import first_row
        from statestore.stores.base import entry_from_row

        raw = self._key(key)
        hit, value = self._cached(raw)
        if hit:
            return value
        row = await first_row(self.session, self.table.get_query(self.session, raw), self.table.profile)
        return self._remember(raw, None if row is None else entry_from_row(row))

    def _cached(self, raw: bytes) -> tuple[bool, Any]:
        """(True, value) when the read cache holds `raw` (absent keys included), else (False, None)."""
        return (False, None) if self.cache is None else self.cache.lookup(raw)

    def _remember(self, raw: bytes, entry: Entry | None) -> Any | None:
        """The decoded value of a read `entry` (None: absent), kept in the read cache if there is one."""
        value = None if entry is None else self._decode_value(entry.value)
        if self.cache is not None:
            self.cache.store(raw, value)
        return value

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
        """Delete `key`; returns the value it had (None if absent)."""
        raw = self._key(key)
        old = self.table.get(self.session, raw)
        if old is not None:
            self.table.delete(self.session, raw)
        if self.cache is not None:
            self.cache.evict(raw)
        return None if old is None else self._decode_value(old.value)

    # -- scans ------------------------------------------------------------------------------------

    def entries(
        self, key_range: KeyRange = EVERYTHING, reverse: bool = False, page_size: int = 5000
    ) -> Iterator[tuple[Any, Any]]:
        """Decoded (key, value) pairs within a raw-key range, in key byte order."""
        return map(self.decode_entry, self.table.scan(self.session, key_range, reverse, page_size))

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        """Entries from `from_key` to `to_key`, both inclusive, ascending. As in Kafka Streams,
        from > to gives nothing."""
        low, high = self._key(from_key), self._key(to_key)
        if low > high:
            return iter(())
        return self.entries(KeyRange(low, high))

    def reverse_range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        low, high = self._key(from_key), self._key(to_key)
        if low > high:
            return iter(())
        return self.entries(KeyRange(low, high), reverse=True)

    def all(self) -> Iterator[tuple[Any, Any]]:
        return self.entries()

    def reverse_all(self) -> Iterator[tuple[Any, Any]]:
        return self.entries(reverse=True)

    def prefix_scan(self, prefix: Any, prefix_codec: Codec | None = None) -> Iterator[tuple[Any, Any]]:
        """Entries whose encoded key starts with the encoded `prefix` (encoded with
        `prefix_codec`, default the key codec; a string prefix of string keys just works)."""
        raw = (prefix_codec or self.key_codec).encode(prefix)
        return self.entries(KeyRange.prefix(raw))

    # -- size ------------------------------------------------------------------------------------

    def approximate_num_entries(self) -> int:
        """With count-all on: the exact count (SELECT COUNT(*), a full scan inside Cassandra).
        Otherwise an estimate from Cassandra's size estimates (flushed data only, refreshed
        every few minutes): 0 when Cassandra has none yet."""
        if self.count_all:
            _log.warning("store %s: counting every entry with SELECT COUNT(*), which reads the whole table", self.name)
            return self.table.count(self.session)
        estimate = size_estimate(self.session, self.spec.keyspace, self.spec.table)
        if estimate is None:
            return 0
        if not self.spec.store_type.partitioned:
            return estimate.partitions  # one entry per Cassandra partition
        sample = [e for _, e in zip(range(_SAMPLE_ENTRIES), self.table.scan_unordered(self.session), strict=False)]
        if not sample:
            return 0
        mean_entry = sum(len(e.key) + len(e.value) + 32 for e in sample) / len(sample)
        return int(estimate.total_bytes / mean_entry)
