"""The CLI's `relayout` command: copy a store into a new table with other sub-partitions, or
drop the table a re-layout left behind. The rules are the library's (statestore.store.relayout);
this command only parses and prints. (`create-store --subpartitions` is in statestore.cli.manage.)"""

from __future__ import annotations

import argparse

from statestore.cli.args import (
    CASSANDRA_BOOKKEEPING,
    CASSANDRA_DDL,
    CASSANDRA_READS,
    add_store,
    at_least_1,
    deprecate,
)
from statestore.conn.cassandra import session_for
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError, ConfirmationRequiredError
from statestore.store import relayout


def cmd_relayout(args) -> int:
    if (args.subpartitions is None) == (args.drop_table is None):
        raise ConfigError("give either --subpartitions N (re-lay out) or --drop-table TABLE (drop the old table)")
    # --yes, as for `reset`; the deprecated --confirm STORE is checked by the library, as before.
    confirm = args.store if args.yes else args.confirm
    if args.drop_table is not None and confirm is None:
        raise ConfirmationRequiredError(
            f"`statestore relayout {args.store} --drop-table {args.drop_table}` deletes the store's copy from "
            "before its re-layout for good (the way back); add --yes to confirm"
        )
    config = cfg.from_args(CassandraConfig, args)
    session = session_for(config)
    if args.drop_table is not None:
        dropped = relayout.drop_old_table(session, config.keyspace, args.store, args.drop_table, confirm)
        print(f"table {dropped} dropped")
        return 0
    result = relayout.relayout_store(session, config.keyspace, args.store, args.subpartitions)
    print(
        f"store {result.store} now reads {result.new_table} ({result.new_subpartitions} sub-partition(s), "
        f"{result.entries} {result.unit} copied and verified in {result.seconds:.1f}s); "
        f"{result.old_table} is kept as the way back: drop it with `statestore relayout {result.store} "
        f"--drop-table {result.old_table} --yes`"
    )
    return 0


def add_commands(command) -> None:
    """Register relayout with the main parser's `command(...)`."""
    p = command(
        "relayout",
        cmd_relayout,
        "copy a partitioned-kv or partitioned-versioned store (every version) into a new table with N "
        "sub-partitions, verify, switch to it (the old table is kept); refused while a stream writes the store",
        cassandra=(CASSANDRA_READS, CASSANDRA_DDL, CASSANDRA_BOOKKEEPING),
    )
    add_store(p)
    p.add_argument("--subpartitions", type=at_least_1, help="the new number of sub-partitions per partition")
    p.add_argument(
        "--drop-table",
        metavar="TABLE",
        help="instead: drop TABLE, the store's table from before a re-layout (no way back after this)",
    )
    p.add_argument("--yes", action="store_true", help="with --drop-table, confirm: the old table is deleted")
    p.add_argument("--confirm", metavar="STORE", help=argparse.SUPPRESS)  # before the rule: the store's name
    deprecate(p, "--confirm STORE", "--yes")
