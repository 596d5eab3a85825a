"""What key-value and versioned stores share: one store's session, spec, codecs, table module,
read cache and schema step. Constructing a store does no I/O; `create()` is the schema step.

The two store kinds differ in what a read returns (a value, or a versioned record), so each
says how a read row becomes what its callers get (`_remember`); the codecs, the key and value
checks and the cache lookup live here once.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.conn.cassandra import DDL_PROFILE
from statestore.core.codecs import Codec, decode_stored
from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import Entry, StoreSpec, check_key, check_value
from statestore.core.options import TableOptions
from statestore.store.cache import CacheOptions, ReadCache
from statestore.store.provision import provision_store
from statestore.store.tables import table_for


class StoreHandle:
    """The base of KeyValueStore and VersionedStore (see the module doc)."""

    VERSIONED: ClassVar[bool]

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
        if spec.store_type.versioned != self.VERSIONED:
            kind = "a versioned" if spec.store_type.versioned else "a key-value"
            raise UnsupportedOperationError(f"store '{spec.name}' is {spec.store_type.value}: open it as {kind} store")
        self.session = session
        self.spec = spec
        self.key_codec = key_codec
        self.value_codec = value_codec
        self.table_options = table_options or TableOptions()
        self.create_table = create_table
        self.count_all = count_all
        self.ddl_profile = ddl_profile
        self.table = table_for(spec, dml_profile)
        # Versioned stores cache current values only (get without as_of); writes evict their key.
        self.cache = ReadCache(cache) if cache is not None else None

    @property
    def name(self) -> str:
        return self.spec.name

    def create(self) -> Self:
        """The schema step: register the store and create its table (unless table creation
        is off, then the table must exist). Safe when many workers run it at once."""
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

    def encode_key(self, key: Any) -> bytes:
        """`key` as it is stored: encoded with the key codec and checked (the codec's error, or
        ValueTooLargeError for a key Cassandra cannot store)."""
        return check_key(self.key_codec.encode(key))

    def _key(self, key: Any) -> bytes:
        return self.encode_key(key)

    def _value(self, value: Any) -> bytes:
        return check_value(self.value_codec.encode(value), self.name)

    def decode_entry(self, entry: Entry) -> tuple[Any, Any]:
        """The (key, value) a stored entry holds, decoded with the store's codecs."""
        return decode_stored(self.key_codec, entry.key, self.name, "key"), self._decode_value(entry.value)

    def _decode_value(self, data: bytes) -> Any:
        return decode_stored(self.value_codec, data, self.name)

    # -- the read cache --------------------------------------------------------------------------

    def _cached(self, raw: bytes) -> tuple[bool, Any]:
        """(True, what a read returned) when the read cache holds `raw` (absent keys included),
        else (False, None)."""
        return (False, None) if self.cache is None else self.cache.lookup(raw)

    def _keep(self, raw: bytes, answer: Any) -> Any:
        """Remember a read's `answer` in the read cache (if there is one); returns it."""
        if self.cache is not None:
            self.cache.store(raw, answer)
        return answer
