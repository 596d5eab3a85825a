"""The data source's options: which store, how to reach Cassandra, what to read. Pure: no I/O.

Spark hands the options over as a case-insensitive map of strings. The Cassandra settings are
the CLI's (statestore.core.config.CassandraConfig: defaults < STATESTORE_* environment <
these options), each given by its setting's name (`keyspace`, `hosts`, `local_dc`) or its flag
without the dashes (`cassandra-hosts`, `cassandra-local-dc`). The rest say what to read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import OptionError
from statestore.core.model import OPEN_END
from statestore.core.names import validate_store_name
from statestore.core.settings import parse_bool

# Input partitions at most, when the `splits` option is not given: a partitioned table gives at
# most one per Cassandra partition, a global table this many token ranges.
DEFAULT_SPLITS = 16
DEFAULT_PAGE_SIZE = 5000
CURRENT, ALL = "current", "all"

_READ_OPTIONS = ("store", "path", "asof", "as_of", "as-of", "versions", "splits", "pagesize", "page_size", "pushdown")


@dataclass(frozen=True)
class ReadOptions:
    """What one `load()` reads: a store, at a time (versioned stores) or every version, in at
    most `splits` input partitions, `page_size` rows per Cassandra page; with `pushdown`, key
    and time filters narrow the read (statestore.dataframe.pushdown; off by default: see
    statestore.dataframe.source for why)."""

    store: str
    as_of: int | None = None
    every_version: bool = False
    splits: int = DEFAULT_SPLITS
    page_size: int = DEFAULT_PAGE_SIZE
    pushdown: bool = False


def _setting_names() -> dict[str, str]:
    """Every accepted option name of a Cassandra setting -> the setting's field name."""
    names = {}
    for f in dataclasses.fields(CassandraConfig):
        names[f.name] = f.name
        names[f.metadata["flag"].lstrip("-")] = f.name
    return names


def cassandra_config(options: Mapping[str, str], env: Mapping[str, str] | None = None) -> CassandraConfig:
    """The Cassandra settings: the CLI's chain, these options over it."""
    names = _setting_names()
    overrides = {names[k.lower()]: v for k, v in options.items() if k.lower() in names}
    return cfg.resolve(CassandraConfig, env, overrides)


def read_options(options: Mapping[str, str]) -> ReadOptions:
    """The read options among `options`; OptionError for an unknown option or a bad value."""
    given = {k.lower(): v for k, v in options.items()}
    unknown = sorted(set(given) - set(_READ_OPTIONS) - set(_setting_names()))
    if unknown:
        raise OptionError(
            f"unknown option(s) {', '.join(unknown)} of the livestate data source: use store, asOf, versions, "
            "splits, pageSize, pushdown, or a Cassandra setting (keyspace, hosts, port, local_dc, username, ...)"
        )
    store = given.get("store") or given.get("path")
    if not store:
        raise OptionError('name the store to read: .option("store", NAME) (or .load(NAME))')
    versions = given.get("versions", CURRENT).strip().lower()
    if versions not in (CURRENT, ALL):
        raise OptionError(f"option versions: {CURRENT} (the default: current values) or {ALL}, not {versions!r}")
    raw_as_of = _first(given, "asof", "as_of", "as-of")
    as_of = None if raw_as_of is None else parse_instant(raw_as_of, "asOf")
    if as_of is not None and versions == ALL:
        raise OptionError("asOf reads the versions valid at one time; versions=all reads every version: not both")
    return ReadOptions(
        validate_store_name(store.strip()),
        as_of,
        versions == ALL,
        _positive(given.get("splits"), "splits", DEFAULT_SPLITS),
        _positive(_first(given, "pagesize", "page_size"), "pageSize", DEFAULT_PAGE_SIZE),
        _flag(given.get("pushdown", "false"), "pushdown"),
    )


def _flag(raw: str, name: str) -> bool:
    try:
        return parse_bool(str(raw))
    except ValueError:
        raise OptionError(f"option {name}: true or false, not {raw!r}") from None


def _first(given: Mapping[str, str], *names: str) -> str | None:
    """The value of the first of `names` given (spellings of one option), or None."""
    return next((given[name] for name in names if name in given), None)


def _positive(raw: Any, name: str, default: int) -> int:
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value < 1:
        raise OptionError(f"option {name}: a whole number of at least 1, not {raw!r}")
    return value


def parse_instant(raw: str, name: str) -> int:
    """An instant as epoch milliseconds: the digits themselves, or an ISO 8601 date or time
    (UTC when it names no zone), as the CLI's TIME arguments."""
    text = str(raw).strip()
    if text.isdigit():
        millis = int(text)
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise OptionError(
                f"option {name}: {raw!r} is not a time; give epoch milliseconds or an ISO 8601 date or time, "
                "e.g. 2026-11-27T00:00:00Z"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        millis = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // _MILLISECOND
    if not 0 <= millis < OPEN_END:
        raise OptionError(f"option {name}: {raw!r} is outside 1970-01-01 .. the end of epoch milliseconds")
    return millis


_MILLISECOND = datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)
