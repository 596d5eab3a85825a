"""The store builder, after the seed's `CassandraStores.builder(session, name)...`.

    store = (StoreBuilder(session, "clicks")
             .with_keyspace("analytics")
             .with_table_options(default_time_to_live=86400)
             .with_value_codec(codecs.JSON)
             .partitioned_key_value_store(partitions=8))
    store.create()          # the schema step, explicit: no I/O before it
    store.put("home", {"n": 1})

Every option is validated when it is set. Defaults: keyspace STATESTORE_KEYSPACE (else
"statestore"), table name "<store>_store", UnifiedCompactionStrategy and no TTL, tables
created by `create()`, DDL on the "ddl" execution profile (consistency ALL), DML on the
default profile (auto: QUORUM), count-all off, string keys and long values, no read cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.conn.cassandra import DDL_PROFILE
from statestore.core import codecs
from statestore.core.config import CassandraConfig, resolve
from statestore.core.errors import CodecError, OptionError, UnsupportedOperationError
from statestore.core.model import StoreSpec, StoreType
from statestore.core.names import store_table, validate_keyspace, validate_store_name, validate_table_name
from statestore.core.options import TableOptions
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.store.book import registry
from statestore.store.cache import CacheOptions
from statestore.store.handle import KeyValueHandle, StoreHandle
from statestore.store.key_value import KeyValueStore
from statestore.store.session import SessionStore
from statestore.store.versioned import VersionedStore
from statestore.store.window import WindowStore

_Store = TypeVar("_Store", bound=StoreHandle)


@dataclass(frozen=True)
class StoreOptions:
    keyspace: str
    table_name_fn: Callable[[str], str] = store_table
    table_options: TableOptions | None = None  # None: the store type's own default (TWCS for windows)
    create_table: bool = True
    ddl_profile: object = DDL_PROFILE
    dml_profile: object = EXEC_PROFILE_DEFAULT
    count_all: bool = False
    key_codec: codecs.Codec = codecs.STRING
    value_codec: codecs.Codec = codecs.LONG
    cache: CacheOptions | None = None


class StoreBuilder:
    """Immutable: every `with_*` returns a new builder, so a base builder can be shared."""

    def __init__(self, session, name: str, options: StoreOptions | None = None) -> None:
        self.session = session
        self.name = validate_store_name(name)
        self.options = options or StoreOptions(keyspace=resolve(CassandraConfig).keyspace)

    def _with(self, **changes: Any) -> StoreBuilder:
        return StoreBuilder(self.session, self.name, replace(self.options, **changes))

    def with_keyspace(self, keyspace: str) -> StoreBuilder:
        return self._with(keyspace=validate_keyspace(keyspace))

    def with_table_name_fn(self, fn: Callable[[str], str]) -> StoreBuilder:
        if not callable(fn):
            raise OptionError("the table-name function must be callable: store name -> table name")
        validate_table_name(fn(self.name))
        return self._with(table_name_fn=fn)

    def with_table_options(self, options: TableOptions | None = None, **changes: Any) -> StoreBuilder:
        """Either a TableOptions, or changes to the current ones (compaction=..., ttl=...)."""
        return self._with(table_options=(options or self.options.table_options or TableOptions()).updated(changes))

    def with_create_table(self, enabled: bool) -> StoreBuilder:
        return self._with(create_table=_flag("create_table", enabled))

    def with_ddl_profile(self, profile: object) -> StoreBuilder:
        if profile == self.options.dml_profile:
            raise OptionError("the DDL profile must differ from the DML profile (DML never runs with the DDL one)")
        return self._with(ddl_profile=_profile_name(profile))

    def with_dml_profile(self, profile: object) -> StoreBuilder:
        if profile == self.options.ddl_profile:
            raise OptionError("the DML profile must differ from the DDL profile (DML never runs with the DDL one)")
        return self._with(dml_profile=_profile_name(profile))

    def with_count_all(self, enabled: bool = True) -> StoreBuilder:
        return self._with(count_all=_flag("count_all", enabled))

    def with_key_codec(self, codec: codecs.Codec | str) -> StoreBuilder:
        return self._with(key_codec=codecs.check_codec(codec))

    def with_value_codec(self, codec: codecs.Codec | str) -> StoreBuilder:
        return self._with(value_codec=codecs.check_codec(codec))

    def with_cache(self, max_entries: int = 10_000, ttl_s: float = 1.0) -> StoreBuilder:
        return self._with(cache=CacheOptions(max_entries, ttl_s))

    # -- terminal methods: one per store type ----------------------------------------------

    def spec(
        self,
        store_type: StoreType,
        partitions: int = 1,
        windowing: WindowSpec | SessionSpec | None = None,
        subpartitions: int = 1,
    ) -> StoreSpec:
        o = self.options
        return StoreSpec(
            o.keyspace,
            self.name,
            store_type,
            partitions,
            o.table_name_fn(self.name),
            o.key_codec.name,
            o.value_codec.name,
            windowing,
            subpartitions,
        )

    def partitioned_key_value_store(self, partitions: int, subpartitions: int = 1) -> KeyValueStore:
        """PRIMARY KEY ((partition), key): ordered scans, range and prefix queries. With
        `subpartitions` N > 1, PRIMARY KEY ((partition, subpartition), key): each partition
        spread over N Cassandra partitions by a hash of the key (default 1: the seed's table)."""
        return self._open(KeyValueStore, self.spec(StoreType.PARTITIONED_KV, partitions, None, subpartitions))

    def global_key_value_store(self) -> KeyValueStore:
        """PRIMARY KEY (key): no partition grows with the store; no range or prefix scans."""
        return self._open(KeyValueStore, self.spec(StoreType.GLOBAL_KV, 1))

    def partitioned_versioned_store(self, partitions: int, subpartitions: int = 1) -> VersionedStore:
        """PRIMARY KEY ((partition), key, valid_to); with `subpartitions` N > 1,
        ((partition, subpartition), key, valid_to) (default 1: the seed's table)."""
        return self._open(VersionedStore, self.spec(StoreType.PARTITIONED_VERSIONED, partitions, None, subpartitions))

    def global_versioned_store(self) -> VersionedStore:
        return self._open(VersionedStore, self.spec(StoreType.GLOBAL_VERSIONED, 1))

    def partitioned_window_store(self, windowing: WindowSpec, partitions: int) -> WindowStore:
        """PRIMARY KEY ((partition, segment), key, window_start): a value per key and time
        window, expired windows dropped a segment at a time."""
        return self._open(WindowStore, self.spec(StoreType.PARTITIONED_WINDOW, partitions, windowing))

    def partitioned_session_store(self, windowing: SessionSpec, partitions: int) -> SessionStore:
        """PRIMARY KEY ((partition, segment), key, session_end, session_start): a value per key
        and session, expired sessions dropped a segment at a time."""
        return self._open(SessionStore, self.spec(StoreType.PARTITIONED_SESSION, partitions, windowing))

    def _open(self, kind: type[_Store], spec: StoreSpec) -> _Store:
        """A store of `kind` over `spec` with this builder's options. The window and session
        stores take neither the read cache nor count-all, and always create their table."""
        o = self.options
        schema: dict[str, Any] = {"dml_profile": o.dml_profile, "ddl_profile": o.ddl_profile}
        if issubclass(kind, KeyValueHandle):
            schema |= {"create_table": o.create_table, "count_all": o.count_all, "cache": o.cache}
        return kind(self.session, spec, o.key_codec, o.value_codec, table_options=o.table_options, **schema)


def open_store(session, keyspace: str, name: str, *, cache: CacheOptions | None = None, count_all: bool = False):
    """An existing key-value or versioned store as registered, with its recorded codecs (custom
    codecs read as bytes; an aggregate store's values as {measure: result}). A window store is
    refused, naming how to read it."""
    spec = registry.lookup(session, keyspace, name)
    if spec.store_type.timed:
        command, opener = (
            ("sessions", "open_session_store") if spec.store_type.sessioned else ("windows", "open_window_store")
        )
        raise UnsupportedOperationError(
            f"store '{name}' is a {spec.store_type.value} store: it holds a value per {command[:-1]}, read it with "
            f"`statestore {command} {name}` (statestore.store.builder.{opener})"
        )
    builder = _registered(session, spec, cache, count_all)
    return builder._open(VersionedStore if spec.store_type.versioned else KeyValueStore, spec)


def open_session_store(session, keyspace: str, name: str) -> SessionStore:
    """An existing session store as registered, with its recorded codecs and session settings."""
    spec = registry.lookup(session, keyspace, name)
    if not spec.store_type.sessioned:
        raise UnsupportedOperationError(
            f"store '{name}' is a {spec.store_type.value} store: it has no sessions"
            + (f", read its windows with `statestore windows {name}`" if spec.store_type.windowed else "")
        )
    return _registered(session, spec, None, False)._open(SessionStore, spec)


def open_window_store(session, keyspace: str, name: str) -> WindowStore:
    """An existing window store as registered, with its recorded codecs and windowing."""
    spec = registry.lookup(session, keyspace, name)
    if not spec.store_type.windowed:
        raise UnsupportedOperationError(
            f"store '{name}' is a {spec.store_type.value} store: it has no windows, read it with get, range or all"
        )
    return _registered(session, spec, None, False)._open(WindowStore, spec)


def _registered(session, spec: StoreSpec, cache: CacheOptions | None, count_all: bool) -> StoreBuilder:
    """A builder for `spec` as registered: its codecs and table name."""
    options = StoreOptions(
        keyspace=spec.keyspace,
        cache=cache,
        count_all=count_all,
        key_codec=_codec_or_bytes(spec.key_codec),
        value_codec=_codec_or_bytes(spec.value_codec),
        table_name_fn=lambda _: spec.table,
    )
    return StoreBuilder(session, spec.name, options)


def _codec_or_bytes(name: str) -> codecs.Codec:
    """The codec a registry row names: a built-in one, an aggregate store's (its value format
    names its measures, so a read returns {measure: result}), else raw bytes (a custom codec)."""
    try:
        return codecs.codec_named(name)
    except CodecError:
        return codecs.BYTES


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise OptionError(f"{name} is true or false, got {value!r}")
    return value


def _profile_name(profile: object) -> object:
    if profile is not EXEC_PROFILE_DEFAULT and not (isinstance(profile, str) and profile):
        raise OptionError(f"an execution profile is a non-empty name, got {profile!r}")
    return profile
