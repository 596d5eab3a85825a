"""The base of the four store kinds: what every store handle holds (the Cassandra session, the
spec, the codecs, the table module, the schema settings) and does (the schema step, encoding and
decoding, the stream time), with one layer per family on top: KeyValueHandle for the key-value and
versioned stores, TimedHandle for the window and session stores.

The rules: constructing a store does no I/O, `create()` is the schema step; each kind opens its
own table module (`_open_table`, which refuses a spec of another kind) and says what a read returns.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace
from itertools import islice
from typing import Any, ClassVar, Self

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.conn.cassandra import DDL_PROFILE
from statestore.core.codecs import Codec, decode_stored, millis_of
from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import EVERYTHING, Entry, KeyRange, StoreSpec, check_key, check_value
from statestore.core.options import TableOptions
from statestore.core.retention import expired, unexpired
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.store.book import registry
from statestore.store.cache import CacheOptions, ReadCache
from statestore.store.provision import provision_store
from statestore.store.retention import ReadHorizon
from statestore.store.table_stats import SizeEstimate, rows_estimate, size_estimate
from statestore.store.tables import table_for

_log = logging.getLogger(__name__)
# The default of every `stream_time_ms=`: not given, so the store's stream time from the registry.
FROM_REGISTRY: Any = object()
_SAMPLE_ROWS = 200


class StoreHandle:
    """What the four store kinds share (see the module doc)."""

    # The table options a store holds when given none (None: its table's own default, applied
    # when the table is created).
    DEFAULT_OPTIONS: ClassVar[TableOptions | None] = None

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
    ) -> None:
        self.table = self._open_table(spec, dml_profile)
        self.session = session
        self.spec = spec
        self.key_codec = key_codec
        self.value_codec = value_codec
        self.table_options = table_options or self.DEFAULT_OPTIONS
        self.create_table = create_table
        self.ddl_profile = ddl_profile

    def _open_table(self, spec: StoreSpec, profile: object):
        """The table module of `spec` (no I/O), statements run with `profile`; refuses a spec
        this kind cannot open, naming how to open it."""
        raise NotImplementedError

    @property
    def name(self) -> str:
        return self.spec.name

    def create(self) -> Self:
        """The schema step: register the store and create its table (unless table creation
        is off, then the table must exist). Safe when many workers run it at once."""
        registered = provision_store(
            self.session,
            self.spec,
            options=self.table_options,
            create_table=self.create_table,
            dead_letters=False,
            ddl_profile=self.ddl_profile,
        )
        self._adopt(registered)
        return self

    def _adopt(self, registered: StoreSpec) -> None:
        """Take the registered store's retention (set by set_retention, not by the builder)."""
        if registered.retention_ms != self.spec.retention_ms:
            self.spec = replace(self.spec, retention_ms=registered.retention_ms)
        if registered.table != self.spec.table:  # a reset moved the store to a new table generation
            self.spec = replace(self.spec, table_name=registered.table)
            self.table = self._open_table(self.spec, self.table.profile)

    # -- the stream time ---------------------------------------------------------------------

    def stream_time(self) -> int | None:
        """The store's stream time (epoch ms): the largest event time the stream applied
        (the registry's max_event_time; None: none yet)."""
        moment = registry.progress(self.session, self.spec.keyspace, self.spec.name).max_event_time
        return None if moment is None else millis_of(moment)

    def _now(self, stream_time_ms: Any) -> int | None:
        """The stream time an operation runs at: `stream_time_ms` when given, else the store's."""
        return self.stream_time() if stream_time_ms is FROM_REGISTRY else stream_time_ms

    # -- codecs ------------------------------------------------------------------------------

    def encode_key(self, key: Any) -> bytes:
        """`key` as it is stored: encoded with the key codec and checked (the codec's error, or
        ValueTooLargeError for a key Cassandra cannot store)."""
        return check_key(self.key_codec.encode(key))

    def _key(self, key: Any) -> bytes:
        return self.encode_key(key)

    def _value(self, value: Any) -> bytes:
        return check_value(self.value_codec.encode(value), self.name)

    def _decode_key(self, data: bytes) -> Any:
        return decode_stored(self.key_codec, data, self.name, "key")

    def _decode_value(self, data: bytes) -> Any:
        return decode_stored(self.value_codec, data, self.name)


class KeyValueHandle(StoreHandle):
    """The base of KeyValueStore and VersionedStore: one value per key (the current one, for a
    versioned store), the optional read cache, exact counts on request and key-range scans."""

    VERSIONED: ClassVar[bool]
    DEFAULT_OPTIONS = TableOptions()

    def __init__(self, *args: Any, count_all: bool = False, cache: CacheOptions | None = None, **kwargs: Any) -> None:
        """What StoreHandle takes, and count-all and the read cache."""
        super().__init__(*args, **kwargs)
        self.count_all = count_all
        # Versioned stores cache current values only (get without as_of); writes evict their key.
        self.cache = ReadCache(cache) if cache is not None else None
        # Where reads cut by the store's retention (statestore.store.retention); with a read
        # cache, the stream time is trusted as long as the cached values are.
        self.horizon = ReadHorizon(self.session, self.spec, self.table.profile, 0.0 if cache is None else cache.ttl_s)

    def _adopt(self, registered: StoreSpec) -> None:
        super()._adopt(registered)
        self.horizon.spec = self.spec

    def _open_table(self, spec: StoreSpec, profile: object):
        if spec.store_type.versioned != self.VERSIONED:
            kind = "a versioned" if spec.store_type.versioned else "a key-value"
            raise UnsupportedOperationError(f"store '{spec.name}' is {spec.store_type.value}: open it as {kind} store")
        return table_for(spec, profile)

    def decode_entry(self, entry: Entry) -> tuple[Any, Any]:
        """The (key, value) a stored entry holds, decoded with the store's codecs."""
        return self._decode_key(entry.key), self._decode_value(entry.value)

    # -- the read cache --------------------------------------------------------------------------

    def _cached(self, raw: bytes) -> tuple[Any, int | None] | None:
        """(what a read returned, its entry's event time) when the read cache holds `raw`
        (absent keys included), else None; `_judged` applies the retention to it."""
        if self.cache is None:
            return None
        hit, kept = self.cache.lookup(raw)
        return kept if hit else None

    @staticmethod
    def _judged(kept: tuple[Any, int | None], cutoff: int | None) -> Any:
        """A cached answer as a read returns it now: absent once its entry is past `cutoff`."""
        answer, time_ms = kept
        return None if expired(time_ms, cutoff) else answer

    def _keep(self, raw: bytes, answer: Any, time_ms: int | None, cutoff: int | None) -> Any:
        """Remember a read's `answer` and its entry's event time in the read cache (if there is
        one); returns the answer, or None when the entry is past `cutoff` (retention)."""
        if self.cache is not None:
            self.cache.store(raw, (answer, time_ms))
        return None if expired(time_ms, cutoff) else answer

    def unexpired(self, entries: Iterable[Entry]) -> Iterator[Entry]:
        """Raw `entries` of this store without those past its retention (the cutoff is taken
        once, now): what every scan of the store shows."""
        return unexpired(entries, self.horizon.cutoff())

    # -- scans (of current values, on a versioned store) ----------------------------------------

    def entries(
        self, key_range: KeyRange = EVERYTHING, reverse: bool = False, page_size: int = 5000
    ) -> Iterator[tuple[Any, Any]]:
        """Decoded (key, value) pairs within a raw-key range, in key byte order (a versioned
        store: current values, deleted keys left out). Paged: never held in memory."""
        return map(self.decode_entry, self.unexpired(self.table.scan(self.session, key_range, reverse, page_size)))

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

    def count_entries(self) -> int:
        """Keys with a value, exactly: SELECT COUNT(*) (a full scan inside Cassandra), or, for a
        store with a retention, a scan that leaves out the entries past it. Reads the whole table."""
        if self.spec.retention_ms is not None:  # entries past the retention are not counted
            return sum(1 for _ in self.unexpired(self.table.scan_unordered(self.session)))
        return self.table.count(self.session)

    def approximate_num_entries(self) -> int:
        """Keys with a value. With count-all on: exact (`count_entries`, with a warning: a setting
        turned a size question into a full read). Otherwise from Cassandra's size estimate
        (flushed data only, refreshed every few minutes; 0 when there is none yet), as each kind
        scales it (`_entries_in`)."""
        if self.count_all:
            how = "within its retention" if self.spec.retention_ms is not None else "with SELECT COUNT(*)"
            _log.warning("store %s: counting every entry %s, which reads the whole table", self.name, how)
            return self.count_entries()
        estimate = size_estimate(self.session, self.spec.keyspace, self.spec.table)
        return 0 if estimate is None else self._entries_in(estimate)

    def _entries_in(self, estimate: SizeEstimate) -> int:
        """The entries Cassandra's size estimate of the table stands for."""
        raise NotImplementedError


class TimedHandle(StoreHandle):
    """The base of WindowStore and SessionStore: values of a key over spans of time, kept by
    segment of time. Retention holds at read time, by the stream time (see the kinds), and a
    segment that holds only expired spans is dropped whole."""

    ROW_OVERHEAD: ClassVar[int]  # bytes a row holds besides its key and value

    @property
    def windowing(self) -> WindowSpec | SessionSpec:
        return self.spec.windowing

    def drop_expired(self, stream_time_ms: Any = FROM_REGISTRY) -> list[int]:
        """Drop every segment that holds only expired spans; returns the segments dropped."""
        doomed = self.windowing.expired_segments(self.table.segments(self.session), self._now(stream_time_ms))
        for segment in doomed:
            self.table.drop_segment(self.session, segment)
        return doomed

    def approximate_num_entries(self) -> int:
        """Spans stored (expired ones until their segment is dropped), estimated from a sample
        of rows (statestore.store.table_stats.rows_estimate)."""
        sample = list(islice(self._stored_rows(), _SAMPLE_ROWS))
        return rows_estimate(self.session, self.spec.keyspace, self.spec.table, sample, self.ROW_OVERHEAD)

    def _stored_rows(self) -> Iterator:
        """Every stored row, retention not applied."""
        raise NotImplementedError
