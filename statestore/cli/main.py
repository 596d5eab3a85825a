"""The `statestore` command line: query stores directly in Cassandra, feed Kafka.

Each command resolves its settings through statestore.core.config (flags > STATESTORE_*
environment > defaults) and delegates to the library; only `main` catches errors, and
statestore.cli.exits turns them into exit codes. Arguments (store names, times, options) are
checked while parsing, before any connection is opened.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from statestore import __version__
from statestore.cli import args as cli_args
from statestore.cli import exits, layout, manage, queries, status
from statestore.cli.args import (
    CASSANDRA_BOOKKEEPING,
    CASSANDRA_CONNECTION,
    CASSANDRA_DDL,
    CASSANDRA_READS,
    FORMATS,
    KAFKA_CONNECTION,
    KAFKA_TOPICS,
    add_format,
)
from statestore.cli.output import emit
from statestore.cli.progress import tracked
from statestore.conn import kafka as kafka_io
from statestore.conn.cassandra import create_keyspace, session_for
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.errors import ConfigError, ConfirmationRequiredError, StateStoreError
from statestore.core.model import Replication
from statestore.core.names import deadletter_table, validate_keyspace, validate_store_name
from statestore.store import admin
from statestore.store.book import deadletters, registry
from statestore.store.provision import table_exists
from statestore.store.tables import table_for


def _spec(args):
    config = cfg.from_args(CassandraConfig, args)
    session = session_for(config)
    return session, registry.lookup(session, config.keyspace, validate_store_name(args.store))


def _store(args):
    session, spec = _spec(args)
    return session, table_for(spec)


def cmd_create_keyspace(args) -> int:
    config = cfg.from_args(CassandraConfig, args)
    keyspace = validate_keyspace(args.name or config.keyspace)
    if args.strategy == "network":
        replication = Replication.network(args.dc or [])
    elif args.dc:
        raise ConfigError("--dc goes with --strategy network (NetworkTopologyStrategy)")
    else:
        replication = Replication(replication_factor=args.replication_factor)
    session = session_for(config)
    nodes = Counter(host.datacenter for host in session.cluster.metadata.all_hosts())
    warning = replication.warning(nodes)
    if warning:
        print(f"warning: keyspace {keyspace}: {warning}", file=sys.stderr)
    create_keyspace(session, keyspace, replication)
    print(f"keyspace {keyspace} ready")
    return 0


def cmd_create_topic(args) -> int:
    count = kafka_io.ensure_topic(cfg.from_args(KafkaConfig, args), args.topic, args.partitions)
    print(f"topic {args.topic} ready with {count} partition(s)")
    return 0


def cmd_produce(args) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    kafka = cfg.from_args(KafkaConfig, args)
    if args.timestamped:
        # Every line is checked before the first is sent, its form and its time against the topic's
        # limits (the broker refuses a record too far ahead): a bad line sends nothing.
        limits = kafka_io.timestamp_limits(kafka, args.topic)
        if limits.log_append_time:
            print(
                f"warning: {limits.where} uses LogAppendTime: the broker stamps each record with its own clock, "
                "not with the line's time",
                file=sys.stderr,
            )
        now_ms, count = int(time.time() * 1000), 0
        for count, timed in enumerate(kafka_io.timed_lines_of(path), start=1):
            limits.check(count, timed.timestamp_ms, now_ms)
        messages = tracked(kafka_io.timed_lines_of(path), count, f"producing {path.name}", "lines")
    else:
        count = None
        messages = tracked(kafka_io.lines_of(path), path.stat().st_size, f"producing {path.name}", "B", _line_bytes)
    kafka_io.ensure_topic(kafka, args.topic, args.partitions)
    sent = kafka_io.produce(kafka, args.topic, messages)
    if count is not None and sent != count:
        raise StateStoreError(f"{path} changed while it was sent: {count} line(s) checked, {sent} sent")
    print(f"produced {sent} message(s) to {args.topic}", file=sys.stderr)
    return 0


def _line_bytes(line: bytes) -> int:
    return len(line) + 1  # and its newline


def cmd_stores(args) -> int:
    config = cfg.from_args(CassandraConfig, args)
    # A read command: it lists what is registered and creates nothing (no CREATE permission needed).
    rows = [
        (
            s.spec.name,
            s.spec.store_type.value,
            s.spec.table,
            s.spec.partitions,
            "" if s.progress.last_batch_id is None else s.progress.last_batch_id,
            s.progress.source_topic or "",
        )
        for s in admin.list_stores(session_for(config), config.keyspace)
    ]
    emit(rows, ("store", "type", "table", "partitions", "last_batch", "topic"), args.format)
    return 0


def cmd_deadletters(args) -> int:
    session, spec = _spec(args)  # any store type: window and session stores' late letters too
    # A store made by the library alone has no dead-letter table until a stream feeds it.
    written = table_exists(session, spec.keyspace, deadletter_table(spec.name))
    rows = (
        (
            d.topic,
            d.kafka_partition,
            d.kafka_offset,
            d.kafka_timestamp_ms,
            d.reason,
            d.detail,
            "" if d.raw is None else d.raw[: args.raw_bytes].hex(),
            d.stream_time_ms,
        )
        for d in (deadletters.read_all(session, spec.keyspace, spec.name) if written else ())
    )
    header = ("topic", "partition", "offset", "timestamp_ms", "reason", "detail", "raw_hex", "stream_time_ms")
    emit(rows, header, args.format)
    return 0


def cmd_reset(args) -> int:
    if not args.yes:
        raise ConfirmationRequiredError(
            f"`statestore reset {args.store}` deletes every count and dead letter of the store and its "
            "recorded position; add --yes to confirm"
        )
    config = cfg.from_args(CassandraConfig, args)
    session = session_for(config)
    before = registry.lookup(session, config.keyspace, validate_store_name(args.store)).table
    spec = admin.truncate_store(
        session,
        config.keyspace,
        args.store,
        verb="resetting",
        writer_stopped=args.writer_stopped,
    )
    print(f"store {args.store} reset: empty, no recorded position; start it with a new --checkpoint")
    if spec.table != before:
        print(f"its table is now {spec.keyspace}.{spec.table} ({before} was dropped: a batch was in flight)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: the top-level options, then every command in the order `--help` lists them."""
    parser = argparse.ArgumentParser(
        prog="statestore",
        usage="%(prog)s [-h] [--version] [CONNECTION OPTIONS] COMMAND [ARGUMENTS] [OPTIONS]",
        description="Query and feed Cassandra-backed stream state stores.\n\nConnection options (Cassandra, "
        "Kafka) go before or after the command;\n`statestore COMMAND --help` lists the options of each command.",
        epilog=exits.epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"statestore {__version__}")
    cli_args.add_global_connection(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    command = _command_factory(sub)
    for add in (
        _add_create_keyspace,
        _add_create_topic,
        _add_produce,
        queries.add_commands,
        status.add_command,
        _add_stores,
        manage.add_commands,
        layout.add_commands,
        _add_deadletters,
        _add_reset,
    ):
        add(command)
    for p in sub.choices.values():
        p.usage = cli_args.short_usage(p)
    return parser


def _command_factory(sub):
    """The `command(name, func, help, ...)` every command module registers its commands with."""

    def command(name, func, help, cassandra=CASSANDRA_READS, kafka=False, fmt=None, old_fmt=""):
        """A subcommand. `cassandra` and `kafka`: False (not used: its connection options are
        accepted with a warning), True (the connection only) or the setting groups it uses beyond
        the connection (a tuple of field-name tuples, or one such tuple); `fmt`: the default of a
        --format with the row formats (`old_fmt`: the default kept for one release, deprecated)."""
        p = sub.add_parser(name, help=help, description=help, prog=f"statestore {name}")
        p.set_defaults(func=func)
        if fmt:
            add_format(p, FORMATS, fmt, old_default=old_fmt)
        for uses, cls, connection in (
            (cassandra, CassandraConfig, CASSANDRA_CONNECTION),
            (kafka, KafkaConfig, KAFKA_CONNECTION),
        ):
            if uses is False:
                cli_args.add_unused_connection(p, cls, connection)
                continue
            groups = () if uses is True or not uses else (uses,) if isinstance(uses[0], str) else tuple(uses)
            cli_args.add_settings(p, cls, connection, *groups)
        return p

    return command


def _add_create_keyspace(command) -> None:
    p = command("create-keyspace", cmd_create_keyspace, "create the keyspace if missing", cassandra=CASSANDRA_DDL)
    p.add_argument("name", nargs="?", help="keyspace (default: --keyspace / STATESTORE_KEYSPACE)")
    p.add_argument(
        "--strategy",
        choices=("simple", "network"),
        default="simple",
        help="simple: SimpleStrategy (a single node; default); network: NetworkTopologyStrategy (a cluster)",
    )
    p.add_argument("--replication-factor", type=int, default=1, help="SimpleStrategy's factor (default 1)")
    p.add_argument(
        "--dc",
        action="append",
        metavar="DC:FACTOR",
        help="with --strategy network: a data center and its replication factor, e.g. dc1:3 (repeatable)",
    )


def _add_create_topic(command) -> None:
    p = command(
        "create-topic", cmd_create_topic, "create a Kafka topic if missing", cassandra=False, kafka=KAFKA_TOPICS
    )
    p.add_argument("topic")
    p.add_argument("--partitions", type=int, default=4, help="default 4")


def _add_produce(command) -> None:
    p = command(
        "produce", cmd_produce, "send each line of FILE as one Kafka message", cassandra=False, kafka=KAFKA_TOPICS
    )
    p.add_argument("topic")
    p.add_argument("file")
    p.add_argument("--partitions", type=int, default=4, help="partitions if the topic must be created (default 4)")
    p.add_argument(
        "--timestamped",
        action="store_true",
        help="each line is <epoch-millis><TAB><text>: send <text> with that Kafka timestamp (its event time); "
        "every line is checked first, its form and its time against the topic's limits "
        "(message.timestamp.after.max.ms / before.max.ms), so a bad line sends nothing",
    )


def _add_stores(command) -> None:
    command("stores", cmd_stores, "the stores registered in the keyspace", fmt="table")


def _add_deadletters(command) -> None:
    p = command("deadletters", cmd_deadletters, "input the store's stream could not count", fmt="table")
    cli_args.add_store(p)
    p.add_argument("--raw-bytes", type=int, default=32, help="raw bytes shown, as hex (default 32)")


def _add_reset(command) -> None:
    p = command(
        "reset",
        cmd_reset,
        "delete a store's counts, dead letters and position (keeps its layout)",
        cassandra=(CASSANDRA_READS, CASSANDRA_DDL, CASSANDRA_BOOKKEEPING),
    )
    cli_args.add_store(p)
    p.add_argument("--yes", action="store_true", help="confirm: the counts are deleted")
    p.add_argument(
        "--writer-stopped",
        action="store_true",
        help="no earlier writer or reset of this store is still running (their processes are gone): take over "
        "the lease an unfinished reset left behind (every writer is refused until then), and reset a global, "
        "window or session store whose last batch was begun and never recorded in place (by default it moves to "
        "a new table, <store>_store_rN)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (statestore.cli.exits), usage errors included."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help and --version (0), usage errors (2): returned like any code
        return exc.code if isinstance(exc.code, int) else exits.USAGE
    for flag in cli_args.ignored_settings(args):
        print(
            f"warning: {flag} is not used by `statestore {args.command}` and has no effect; "
            "it is deprecated here and will be refused in a later release",
            file=sys.stderr,
        )
    for flag in cli_args.unused_connection(args):
        print(f"warning: {flag} is not used by `statestore {args.command}` and has no effect", file=sys.stderr)
    try:
        for warning in cli_args.deprecated_spellings(args):
            print(warning, file=sys.stderr)
        return args.func(args)
    except BrokenPipeError:  # `statestore dump | head`
        return exits.OK
    except Exception as exc:  # noqa: BLE001 - every error ends in one line and its exit code
        code = exits.exit_code(exc)
        if code == exits.UNEXPECTED and not isinstance(exc, StateStoreError):
            traceback.print_exc(file=sys.stderr)
            print(f"statestore: unexpected error: {type(exc).__name__}: {exc}", file=sys.stderr)
        else:
            print(f"statestore: {exc}", file=sys.stderr)
        return code
