"""The CLI's store-management commands: create-store, set-retention and migrate.

Each delegates to the library (statestore.store.admin, statestore.store.retention); durations
are read while parsing (statestore.core.retention: 7d, 12h, or none), before any connection.
"""

from __future__ import annotations

import argparse

from statestore.cli.args import (
    CASSANDRA_BOOKKEEPING,
    CASSANDRA_DDL,
    CASSANDRA_READS,
    add_store,
    at_least_1,
)
from statestore.conn.cassandra import session_for
from statestore.core import codecs
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.model import StoreType
from statestore.core.retention import format_retention, parse_retention
from statestore.store import admin, migration
from statestore.store.book import schema
from statestore.store.retention import set_retention

_RETENTION_HELP = (
    "entries whose event time is more than this before the store's stream time are absent to every reader and "
    "to the stream (which counts them from zero); the expire job reclaims their space. A duration (30m, 12h, 7d) "
    "or none"
)
_KEY_VALUE_TYPES = tuple(t.value for t in StoreType if not t.timed)


def _retention(raw: str) -> int | None:
    try:
        return parse_retention(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_create_store(args) -> int:
    config = cfg.from_args(CassandraConfig, args)
    spec = admin.create_store(
        session_for(config),
        config.keyspace,
        args.store,
        args.store_type,
        args.partitions,
        key_codec=args.key_codec,
        value_codec=args.value_codec,
        retention_ms=args.retention,
        subpartitions=args.subpartitions,
    )
    sub = f" x {spec.subpartitions} sub-partitions" if spec.subpartitions > 1 else ""
    print(
        f"store {spec.name} ready: {spec.store_type.value}, {spec.partitions} partition(s){sub}, table {spec.table}, "
        f"retention {format_retention(spec.retention_ms)}"
    )
    return 0


def cmd_set_retention(args) -> int:
    config = cfg.from_args(CassandraConfig, args)
    spec = set_retention(session_for(config), config.keyspace, args.store, args.retention)
    print(
        f"store {spec.name}: retention {format_retention(spec.retention_ms)} (the stream applies it from its next "
        "batch, readers as they open the store)"
    )
    return 0


def cmd_migrate(args) -> int:
    config = cfg.from_args(CassandraConfig, args)
    session = session_for(config)
    if args.store:
        migrations = [migration.migrate_store(session, config.keyspace, args.store)]
    else:
        migrations = migration.migrate_keyspace(session, config.keyspace)
    for done in migrations:
        print(done.describe())
    if not migrations:
        print(f"keyspace {config.keyspace} holds no stores: nothing to migrate")
    return 0


def add_commands(command) -> None:
    """Register create-store, set-retention and migrate with the main parser's `command(...)`."""
    p = command(
        "create-store",
        cmd_create_store,
        "register a key-value or versioned store and create its table, if missing (window and session stores "
        "are made by their stream)",
        cassandra=(CASSANDRA_READS, CASSANDRA_DDL, CASSANDRA_BOOKKEEPING),
    )
    add_store(p)
    p.add_argument(
        "--type",
        dest="store_type",
        choices=_KEY_VALUE_TYPES,
        default=StoreType.PARTITIONED_KV.value,
        help="default %(default)s",
    )
    p.add_argument("--partitions", type=int, default=4, help="store partitions of a partitioned type (default 4)")
    p.add_argument(
        "--subpartitions",
        type=at_least_1,
        default=1,
        help="partitioned-kv and -versioned: Cassandra partitions per store partition, by a hash of the key "
        "(default 1: PRIMARY KEY ((partition), key...), the seed's table; N > 1: ((partition, subpartition), "
        "key...), each partition about 1/N as large; `statestore relayout` changes it later)",
    )
    p.add_argument("--key-codec", choices=tuple(codecs.BUILT_IN), default="string", help="default string")
    p.add_argument("--value-codec", choices=tuple(codecs.BUILT_IN), default="long", help="default long")
    p.add_argument("--retention", type=_retention, metavar="DURATION|none", help=f"{_RETENTION_HELP} (default: none)")

    p = command(
        "set-retention",
        cmd_set_retention,
        "set or remove a key-value or versioned store's retention",
        cassandra=(CASSANDRA_READS, CASSANDRA_BOOKKEEPING),
    )
    add_store(p, old_flag=True)  # `set-retention --store STORE DURATION` before the rule
    p.add_argument("retention", type=_retention, metavar="DURATION|none", help=_RETENTION_HELP)

    p = command(
        "migrate",
        cmd_migrate,
        f"bring stores made by an earlier release up to schema version {schema.SCHEMA_VERSION}, and turn the "
        "hopping window count stores a stream writes into panes (copied and verified; the old table is kept); "
        "idempotent, refused while a stream writes the store (stop it first); the stream refuses a store until then",
        cassandra=(CASSANDRA_READS, CASSANDRA_DDL, CASSANDRA_BOOKKEEPING),
    )
    add_store(p, old_flag=True, optional="every store of the keyspace")  # `migrate --store STORE` before the rule
