"""What the CLI's commands share on their command lines: which settings each command shows,
the one `--format` option, times, and store names checked while parsing (before any I/O).

Settings come from statestore.core.config, split here by who uses them: the connection options
(how to reach Cassandra or Kafka) go on every command that connects, and also before the
command (`statestore --keyspace k get s x`); the rest only on the commands that use them. A
setting a command does not use, but that its `--help` listed before, is still accepted (hidden)
with a warning that it has no effect.
"""

from __future__ import annotations

import argparse
import dataclasses
from datetime import UTC, datetime

from statestore.core import settings
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.errors import InvalidNameError
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


def short_usage(parser: argparse.ArgumentParser) -> str:
    """The command's usage line with its own arguments, the settings summed up as [OPTIONS...]
    (a fixed width, so the generated reference does not depend on the terminal)."""
    dests = set(CASSANDRA_CONNECTION + KAFKA_CONNECTION)
    dests.update(f.name for cls in (CassandraConfig, KafkaConfig) for f in dataclasses.fields(cls))
    own = [a for a in parser._actions if a.dest not in dests]
    formatter = argparse.HelpFormatter(parser.prog, width=100)
    formatter.add_usage(None, own, [], prefix="")
    usage = formatter.format_help().strip()
    connects = [a for a in parser._actions if a.dest in dests and a.help != argparse.SUPPRESS]
    return usage + (" [CONNECTION OPTIONS]" if connects else "")


def ignored_settings(args: argparse.Namespace) -> list[str]:
    """The flags given to a command that does not use them (accepted for compatibility)."""
    return [flag for name, flag in (getattr(args, _IGNORED, None) or {}).items() if name in vars(args)]


# -- output formats ----------------------------------------------------------------------------

FORMATS = ("table", "csv", "json", "jsonl")  # rows: every listing command
RECORD_FORMATS = ("table", "json", "jsonl")  # one record of named fields: status, describe
VALUE = "value"  # one value alone: get, count
_FORMAT_HELP = {
    "table": "aligned columns",
    "csv": "CSV with a header row",
    "json": "one JSON document",
    "jsonl": "one JSON object per line",
    VALUE: "the value alone",
}


def add_format(parser: argparse.ArgumentParser, choices: tuple[str, ...], default: str, what: str = "") -> None:
    """The one --format option: the same names and meanings on every command."""
    shown = "; ".join(f"{c}: {_FORMAT_HELP[c]}" for c in choices)
    parser.add_argument(
        "--format",
        choices=choices,
        default=default,
        help=f"output format (default {default}): {shown}{what}",
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
