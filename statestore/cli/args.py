"""What the CLI's commands share on their command lines: which settings each command shows,
the one `--format` option, times, and store names checked while parsing (before any I/O).

Settings come from statestore.core.config, split here by who uses them: the connection options
(how to reach Cassandra or Kafka) are accepted by every command, before or after it (`statestore
--keyspace k get s x`), listed by the commands that connect; the rest only on the commands that
use them. A connection option a command does not use, wherever given, and a setting a command
does not use but that its `--help` listed before, are accepted (hidden) with a warning that they
have no effect.

The CLI's one rule (docs/cli.md, Conventions; tests/unit/cli/test_cli_rules.py holds every command
to it): a store is named by the first argument (`add_store`), a destructive step is confirmed with
`--yes`, every command that prints rows or a record takes the one `--format` (FORMATS, plus `value`
where it prints one value), and the connection options go anywhere. Spellings from before the rule
are kept for one release with a deprecation warning (`deprecated_spellings`).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from datetime import UTC, datetime

from statestore.core import settings
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.errors import InvalidNameError, OptionError
from statestore.core.names import validate_store_name

# -- settings groups ---------------------------------------------------------------------------

CASSANDRA_CONNECTION = (
    "hosts",
    "port",
    "keyspace",
    "username",
    "password",
    "password_file",
    "local_dc",
    "protocol_version",
    "request_timeout_s",
    "ssl",
    "ssl_ca_file",
    "ssl_cert_file",
    "ssl_key_file",
    "ssl_check_hostname",
)
CASSANDRA_READS = ("dml_consistency", "allow_weak_consistency")  # reading (and writing) entries
CASSANDRA_DDL = ("ddl_consistency",)  # schema steps and admin changes
CASSANDRA_BOOKKEEPING = ("bookkeeping_consistency", "serial_consistency")  # registry and lease writes
KAFKA_CONNECTION = (
    "bootstrap_servers",
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "sasl_password_file",
    "kafka_ssl_ca_file",
    "kafka_ssl_cert_file",
    "kafka_ssl_key_file",
    "kafka_ssl_check_hostname",
)
KAFKA_TOPICS = ("topic_replication", "min_insync_replicas")  # topics this project creates

CASSANDRA_TITLE = "Cassandra connection (also accepted before the command)"
KAFKA_TITLE = "Kafka connection (also accepted before the command)"
_TITLES = {
    CASSANDRA_READS: "Cassandra reads",
    CASSANDRA_DDL: "Cassandra schema changes",
    CASSANDRA_BOOKKEEPING: "Cassandra registry and lease writes",
    KAFKA_TOPICS: "Kafka topics created",
}
_IGNORED = "_ignored_settings"  # the namespace attribute naming the hidden settings of a command
_UNUSED = "_unused_connection"  # the connection options a command accepts and does not use


def add_global_connection(parser: argparse.ArgumentParser) -> None:
    """The connection options before the command: None when not given, so the command's own
    (given after it) or the environment decide."""
    settings.add_arguments(parser, CassandraConfig, only=CASSANDRA_CONNECTION, title=CASSANDRA_TITLE)
    settings.add_arguments(parser, KafkaConfig, only=KAFKA_CONNECTION, title=KAFKA_TITLE)


def add_settings(parser: argparse.ArgumentParser, cls: type, connection: tuple, *extra: tuple) -> None:
    """`cls`'s connection settings and the `extra` groups, listed; its other settings hidden.
    Not given, they stay out of the namespace (SUPPRESS): a value before the command stands."""
    title = CASSANDRA_TITLE if cls is CassandraConfig else KAFKA_TITLE
    settings.add_arguments(parser, cls, only=connection, title=title, default=argparse.SUPPRESS)
    for group in extra:
        settings.add_arguments(parser, cls, only=group, title=_TITLES[group], default=argparse.SUPPRESS)
    used = set(connection).union(*extra)
    unused = [f.name for f in dataclasses.fields(cls) if f.name not in used]
    settings.add_arguments(parser, cls, only=unused, default=argparse.SUPPRESS, hidden=True)
    flags = {f.name: f.metadata["flag"] for f in dataclasses.fields(cls)}
    ignored = dict(parser.get_default(_IGNORED) or {})
    ignored.update((n, flags[n]) for n in unused)
    parser.set_defaults(**{_IGNORED: ignored})


def add_unused_connection(parser: argparse.ArgumentParser, cls: type, connection: tuple) -> None:
    """`cls`'s connection settings on a command that does not use them: accepted after the command
    as before it (hidden), with a warning that they have no effect (`unused_connection`)."""
    settings.add_arguments(parser, cls, only=connection, default=argparse.SUPPRESS, hidden=True)
    flags = {f.name: f.metadata["flag"] for f in dataclasses.fields(cls) if f.name in connection}
    unused = dict(parser.get_default(_UNUSED) or {})
    unused.update(flags)
    parser.set_defaults(**{_UNUSED: unused})


def short_usage(parser: argparse.ArgumentParser) -> str:
    """The command's usage line with its own arguments, the settings summed up as [OPTIONS...]
    (a fixed width, so the generated reference does not depend on the terminal)."""
    dests = set(CASSANDRA_CONNECTION + KAFKA_CONNECTION)
    dests.update(f.name for cls in (CassandraConfig, KafkaConfig) for f in dataclasses.fields(cls))
    own = [a for a in parser._actions if a.dest not in dests]
    if parser.get_default(_REQUIRED):  # STORE, optional to argparse only for the old --store: shown as required
        own = [copy.copy(a) if a.dest == "store" else a for a in own]
        for a in own:
            if a.dest == "store":
                a.nargs = None
    formatter = argparse.HelpFormatter(parser.prog, width=100)
    formatter.add_usage(None, own, [], prefix="")
    usage = formatter.format_help().strip()
    connects = [a for a in parser._actions if a.dest in dests and a.help != argparse.SUPPRESS]
    return usage + (" [CONNECTION OPTIONS]" if connects else "")


def ignored_settings(args: argparse.Namespace) -> list[str]:
    """The flags given to a command that does not use them (accepted for compatibility)."""
    return [flag for name, flag in (getattr(args, _IGNORED, None) or {}).items() if name in vars(args)]


def unused_connection(args: argparse.Namespace) -> list[str]:
    """The connection options given, before or after the command, to a command that does not use
    them (a None value: the top-level option's default, not given)."""
    given = vars(args)
    return [flag for name, flag in (getattr(args, _UNUSED, None) or {}).items() if given.get(name) is not None]


# -- output formats ----------------------------------------------------------------------------

FORMATS = ("table", "csv", "json", "jsonl")  # rows, or one record of named fields (status, describe)
VALUE = "value"  # one value alone: get, count
_FORMAT_HELP = {
    "table": "aligned columns",
    "csv": "CSV with a header row",
    "json": "one JSON document",
    "jsonl": "one JSON object per line",
    VALUE: "the value alone",
}


def add_format(
    parser: argparse.ArgumentParser, choices: tuple[str, ...], default: str, what: str = "", old_default: str = ""
) -> None:
    """The one --format option: the same names and meanings on every command. `old_default`: the
    command's default before the rule, still its default for one release, with a warning when
    --format is not given (`deprecated_spellings`); `default` is then the next release's."""
    shown = "; ".join(f"{c}: {_FORMAT_HELP[c]}" for c in choices)
    said = f"default {default}"
    if old_default:
        said = f"default {old_default} in this release, deprecated: {default} from the next release"
        parser.set_defaults(**{_OLD_DEFAULT: old_default})
        deprecate(parser, f"no --format: {old_default}", f"--format {old_default} (no --format: {default})")
    parser.add_argument(
        "--format",
        choices=choices,
        default=None if old_default else default,
        help=f"output format ({said}): {shown}{what}",
    )


# -- arguments checked while parsing ---------------------------------------------------------

LAST_MS = 2**63 - 2
TIME_FORMS = (
    "TIME is epoch milliseconds (1764201600000) or an ISO 8601 date or time, UTC unless it names "
    "an offset (2025-11-27, 2025-11-27T00:00:00Z, 2025-11-27T01:00+01:00)"
)


def parse_time(raw: str) -> int:
    """A TIME argument as epoch milliseconds: the digits themselves, or an ISO 8601 date/time."""
    text = raw.strip()
    if text.isdigit():
        if int(text) > LAST_MS:
            raise argparse.ArgumentTypeError(f"epoch milliseconds from 0 to {LAST_MS}, got {raw!r}")
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{raw!r} is not a time: give epoch milliseconds or an ISO 8601 date or time, e.g. 2025-11-27T00:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    millis = int(moment.timestamp() * 1000)
    if millis < 0:
        raise argparse.ArgumentTypeError(f"{raw!r} is before 1970-01-01T00:00:00Z (epoch 0)")
    return millis


STORE_HELP = "the store's name (checked before connecting; `statestore stores` lists them)"
_OLD_DEFAULT = "_old_default_format"  # a --format default kept for one release
_DEPRECATED = "_deprecated_spellings"  # the namespace attribute: a command's old spellings still accepted
_STORE_FLAG = "_store_flag"  # where a deprecated `--store STORE` lands
_REQUIRED = "_store_required"  # a STORE that is optional only so that the old `--store` still parses


def add_store(parser: argparse.ArgumentParser, *, old_flag: bool = False, optional: str = "") -> None:
    """The STORE argument, first after the command, as on every command. `optional`: what the
    command does without one (said in its help). `old_flag`: `--store STORE` was this command's
    spelling before the rule; it is still accepted, with a deprecation warning, for one release
    (the argument is then optional to argparse and required by `deprecated_spellings`)."""
    help_text = STORE_HELP + (f" (default: {optional})" if optional else "")
    parser.add_argument("store", nargs="?" if optional or old_flag else None, type=store_name, help=help_text)
    if old_flag:
        parser.add_argument("--store", dest=_STORE_FLAG, type=store_name, help=argparse.SUPPRESS)
        parser.set_defaults(**{_REQUIRED: not optional})
        deprecate(parser, "--store STORE", "STORE as the first argument")


def deprecate(parser: argparse.ArgumentParser, spelling: str, instead: str) -> None:
    """Record that `spelling` is accepted by this command for one more release; `instead`: the
    spelling of the rule (docs/cli.md, Deprecated spellings)."""
    old = dict(parser.get_default(_DEPRECATED) or {})
    old[spelling] = instead
    parser.set_defaults(**{_DEPRECATED: old})


def deprecations(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The old spellings `parser` still accepts, each with what to write instead."""
    return dict(parser.get_default(_DEPRECATED) or {})


def deprecated_spellings(args: argparse.Namespace) -> list[str]:
    """Fold the old spellings given into the rule's (args changed in place); the warnings to print.
    Two stores, or none where one is needed: OptionError (exit 2)."""
    warnings = []
    command = f"statestore {args.command}"
    if getattr(args, _STORE_FLAG, None) is not None:
        flag = getattr(args, _STORE_FLAG)
        if args.store is not None and args.store != flag:
            raise OptionError(f"`{command}` got two stores, {args.store} and --store {flag}: give one, first")
        args.store = flag
        warnings.append(
            f"`{command} --store STORE` is deprecated and will be refused in a later release: give the store first, "
            f"`{command} {flag} ...`"
        )
    if getattr(args, _REQUIRED, False) and args.store is None:
        raise OptionError(f"`{command}` needs a store: `{command} STORE ...`")
    if getattr(args, "confirm", None) is not None:
        warnings.append(f"`{command} --confirm STORE` is deprecated and will be refused in a later release: give --yes")
    if "format" in vars(args) and args.format is None:  # a default kept for one release (dump's csv)
        args.format = getattr(args, _OLD_DEFAULT)
        warnings.append(
            f"`{command}` without --format is deprecated: it prints {args.format} in this release only, a table "
            f"from the next (as every command that prints rows); give --format {args.format} to keep {args.format}"
        )
    return [f"warning: {w}" for w in warnings]


def store_name(raw: str) -> str:
    """A STORE argument, refused while parsing (exit 2, nothing connected) if not a valid name."""
    try:
        return validate_store_name(raw)
    except InvalidNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def at_least_1(raw: str) -> int:
    if not raw.isdigit() or int(raw) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, got {raw!r}")
    return int(raw)
