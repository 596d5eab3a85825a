"""CassandraStateStoreHook: an Airflow connection adapter over the statestore library.

Named for the stream state stores this project keeps in Cassandra, not to be confused with
Airflow's own task state store. The hook maps an Airflow connection of the provider's own
`statestore` type (statestore_airflow.provider; a connection of another type, such as the
`cassandra` type of earlier releases, is read the same way) to a
statestore.core.config.CassandraConfig and hands the library a session from
statestore.conn.cassandra.session_for: its own driver Cluster with execution profiles (DML and
DDL) and token-aware routing, not the provider's CassandraHook, whose legacy load-balancing
setting turns execution profiles off. Every store rule lives in statestore.store.admin.

Connection fields:
  host      contact points, comma-separated            port      CQL port (default 9042)
  login     user (PasswordAuthenticator)               password  its password
  schema    keyspace holding the stores (default wordcount)
  extra     ssl, ssl_ca, ssl_cert, ssl_key, check_hostname, dml_consistency, allow_weak_consistency,
            ddl_consistency, bookkeeping_consistency, serial_consistency, local_dc, protocol_version,
            request_timeout (seconds)

    AIRFLOW_CONN_STATESTORE_CASSANDRA='{"conn_type": "statestore", "host": "127.0.0.1",
        "port": 9042, "schema": "wordcount", "extra": {"dml_consistency": "LOCAL_QUORUM"}}'
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseHook

from statestore.conn.cassandra import session_for
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError
from statestore.core.model import KeyRange
from statestore.core.names import validate_keyspace
from statestore.core.retention import check_retention, parse_retention
from statestore.store import admin, migration, relayout
from statestore.store.book import lease
from statestore.store.builder import open_store
from statestore.store.retention import set_retention
from statestore_airflow import dag_support

CONN_TYPE = "statestore"  # the provider's connection type (statestore_airflow.provider)
# Connection extra -> CassandraConfig field.
EXTRA_FIELDS = {
    "ssl": "ssl",
    "ssl_ca": "ssl_ca_file",
    "ssl_cert": "ssl_cert_file",
    "ssl_key": "ssl_key_file",
    "check_hostname": "ssl_check_hostname",
    "dml_consistency": "dml_consistency",
    "allow_weak_consistency": "allow_weak_consistency",
    "ddl_consistency": "ddl_consistency",
    "bookkeeping_consistency": "bookkeeping_consistency",
    "serial_consistency": "serial_consistency",
    "local_dc": "local_dc",
    "protocol_version": "protocol_version",
    "request_timeout": "request_timeout_s",
}


def connection_config(conn, keyspace: str | None = None) -> CassandraConfig:
    """The CassandraConfig an Airflow connection describes (no I/O). Only the connection counts:
    STATESTORE_* variables of the worker do not leak in. Values are parsed and validated as the
    library's own settings are; an unknown extra is an error naming the known ones."""
    extras = dag_support.connection_extras(conn, CONN_TYPE, EXTRA_FIELDS)
    given: dict[str, Any] = {
        "hosts": conn.host or None,
        "port": conn.port,
        "username": conn.login or None,
        "password": conn.password or None,
        "keyspace": keyspace or conn.schema or None,
    }
    given.update({EXTRA_FIELDS[k]: v for k, v in extras.items()})
    # As text, so every value goes through the same parser as its STATESTORE_* variable.
    overrides = {k: _text(v) for k, v in given.items() if v is not None and v != ""}
    try:
        return cfg.resolve(CassandraConfig, env={}, overrides=overrides)
    except ConfigError as exc:
        raise ConfigError(f"connection '{conn.conn_id}': {exc}") from None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class CassandraStateStoreHook(BaseHook):
    """Manage and read the stream state stores of one keyspace.

    :param cassandra_conn_id: a `statestore` connection (default `statestore_cassandra`)
    :param keyspace: overrides the connection's schema
    """

    conn_name_attr = "cassandra_conn_id"
    default_conn_name = "statestore_cassandra"
    conn_type = CONN_TYPE
    hook_name = "Cassandra state stores (statestore)"

    def __init__(self, cassandra_conn_id: str = default_conn_name, keyspace: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.cassandra_conn_id = cassandra_conn_id
        self._keyspace = None if keyspace is None else validate_keyspace(keyspace)
        self._config: CassandraConfig | None = None

    @property
    def config(self) -> CassandraConfig:
        """The connection's CassandraConfig, looked up on first use, never in `__init__` (DAG
        files build hooks at parse time)."""
        if self._config is None:
            self._config = connection_config(self.get_connection(self.cassandra_conn_id), self._keyspace)
        return self._config

    @property
    def keyspace(self) -> str:
        """The keyspace of the stores: the `keyspace` argument, else the connection's schema."""
        return self.config.keyspace

    def get_conn(self):
        """The driver session (process-wide, connected on first use)."""
        return session_for(self.config)

    # -- management: statestore.store.admin ------------------------------------------------------------

    def list_stores(self) -> list[admin.StoreListing]:
        """Every store of the keyspace with its layout and progress (statestore.store.admin.list_stores)."""
        return admin.list_stores(self.get_conn(), self.keyspace)

    def writers(self) -> dict[str, str]:
        """Which stores a stream writes right now: store -> the lease holder (host:pid:id)."""
        return {store: held.holder for store, held in lease.holders(self.get_conn(), self.keyspace).items()}

    def create_store(
        self,
        name: str,
        store_type: str = "partitioned-kv",
        partitions: int = 1,
        options: Mapping[str, Any] | None = None,
        key_codec: str = "string",
        value_codec: str = "long",
        *,
        retention: str | int | None = None,
        subpartitions: int = 1,
    ):
        """See statestore.store.admin.create_store; `retention` as in set_retention (None: none set);
        `subpartitions` > 1 (partitioned-kv, partitioned-versioned) spreads each partition over that many."""
        return admin.create_store(
            self.get_conn(),
            self.keyspace,
            name,
            store_type,
            partitions,
            options,
            key_codec,
            value_codec,
            retention_ms=retention_ms_of(retention),
            subpartitions=subpartitions,
        )

    def relayout_store(self, name: str, subpartitions: int) -> relayout.RelayoutResult:
        """Copy the store into a new table of `subpartitions` sub-partitions, verify, switch to
        it and keep the old table (statestore.store.relayout.relayout_store); refused while a
        stream writes the store."""
        return relayout.relayout_store(self.get_conn(), self.keyspace, name, subpartitions)

    def migrate(self, name: str | None = None) -> list[migration.StoreMigration]:
        """Bring store `name` (None: every store of the keyspace) up to this release's schema
        version and turn a hopping window count store a stream writes into panes
        (statestore.store.migration, as `statestore migrate`); refused while a stream writes a
        store to migrate."""
        if name is None:
            return migration.migrate_keyspace(self.get_conn(), self.keyspace)
        return [migration.migrate_store(self.get_conn(), self.keyspace, name)]

    def drop_old_table(self, name: str, table: str, confirm: str | None) -> str:
        """Drop the table a re-layout left behind (statestore.store.relayout.drop_old_table)."""
        return relayout.drop_old_table(self.get_conn(), self.keyspace, name, table, confirm)

    def set_retention(self, name: str, retention: str | int | None):
        """Set a key-value or versioned store's retention: a duration ('7d', '12h'), milliseconds,
        or 'none' / None to remove it (statestore.store.retention.set_retention)."""
        return set_retention(self.get_conn(), self.keyspace, name, retention_ms_of(retention))

    def describe_store(self, name: str, count_partitions: bool = True) -> admin.StoreDescription:
        """Schema, table options, size estimate, largest partition, progress and writer;
        `count_partitions` also counts the entries of each store partition, reading the whole
        table (statestore.store.admin.describe_store)."""
        return admin.describe_store(self.get_conn(), self.keyspace, name, count_partitions=count_partitions)

    def alter_store(self, name: str, changes: Mapping[str, Any]):
        """Change table options: `ttl` (seconds, 0 none), `compaction`, `compaction_options`,
        `gc_grace_seconds`, `comment` (statestore.store.admin.alter_store)."""
        return admin.alter_store(self.get_conn(), self.keyspace, name, changes)

    def truncate_store(self, name: str, writer_stopped: bool = False):
        """See statestore.store.admin.truncate_store (`writer_stopped`: no earlier writer or reset
        of the store is still running: take over the lease an unfinished reset left behind, and
        truncate in place rather than move a store with a batch in flight to a new table)."""
        return admin.truncate_store(self.get_conn(), self.keyspace, name, writer_stopped=writer_stopped)

    def drop_store(self, name: str, confirm: str | None, writer_stopped: bool = False):
        """Drop the store's tables and forget it, only when `confirm` is its name; refused while
        a stream writes it, and while a batch is begun and not recorded (or a reset cleared such a
        batch) unless `writer_stopped` (statestore.store.admin.drop_store)."""
        return admin.drop_store(self.get_conn(), self.keyspace, name, confirm, writer_stopped=writer_stopped)

    # -- reads ------------------------------------------------------------------------------------

    def get(self, store: str, key: Any) -> Any | None:
        """The value of `key` (as the store's key codec reads it), or None."""
        return open_store(self.get_conn(), self.keyspace, store).get(key)

    def scan(
        self,
        store: str,
        *,
        prefix: Any = None,
        lower: Any = None,
        upper: Any = None,
        limit: int = 1000,
    ) -> list[tuple[Any, Any]]:
        """Up to `limit` (key, value) pairs in key order: a prefix, an inclusive range (either
        bound may be open), or everything. Ranges and prefixes need an ordered store type."""
        handle = open_store(self.get_conn(), self.keyspace, store)
        if prefix is not None:
            pairs = handle.prefix_scan(prefix)
        elif lower is not None or upper is not None:
            encode = handle.key_codec.encode
            bounds = KeyRange(None if lower is None else encode(lower), None if upper is None else encode(upper))
            pairs = handle.entries(bounds)
        else:
            pairs = handle.all()
        return list(itertools.islice(pairs, limit))

    def top_entries(self, store: str, limit: int = 10) -> list[tuple[Any, int]]:
        """The `limit` highest counts, highest first (statestore.store.admin.top_entries)."""
        return admin.top_entries(self.get_conn(), self.keyspace, store, limit)


def retention_ms_of(retention: str | int | None) -> int | None:
    """A retention as the hook and the admin DAG take it: a duration text ('7d', 'none'),
    milliseconds, or None (none); ConfigError for anything else."""
    try:
        if isinstance(retention, str):
            return parse_retention(retention)
        return check_retention(retention)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
