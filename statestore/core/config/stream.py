"""StreamConfig: what a word-count stream job runs (its topic, store, checkpoint, windows or
sessions, trigger and limits).

A frozen dataclass of settings (statestore.core.settings: defaults < STATESTORE_* environment <
flags). Its checks refuse combinations that cannot count (a window and a session gap together,
--hop without --window, a store type that contradicts the windowing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from statestore.core.aggregation import AggregateSpec
from statestore.core.durations import parse_duration, parse_trigger
from statestore.core.errors import ConfigError, OptionError
from statestore.core.model import StoreType
from statestore.core.names import validate_store_name, validate_topic
from statestore.core.options import compaction_class
from statestore.core.settings import (
    parse_bool,
    parse_non_negative_int,
    parse_positive_float,
    parse_positive_int,
    setting,
)
from statestore.core.windows import SessionSpec, WindowSpec

# The store types an aggregate store may be, this round (sessions come later).
AGGREGATE_STORE_TYPES = (
    StoreType.PARTITIONED_KV,
    StoreType.GLOBAL_KV,
    StoreType.PARTITIONED_WINDOW,
    StoreType.PARTITIONED_SESSION,
)

# How far a record's event time may be ahead of its batch's clock (StreamConfig.max_future_ms).
DEFAULT_MAX_FUTURE_MS = 300_000


def _store_type(raw: str) -> str:
    return StoreType.parse(raw).value


def _duration(what: str, zero: bool = False):
    return lambda raw: parse_duration(raw, what, zero)


def _starting_offsets(raw: str) -> str:
    if raw not in ("earliest", "latest"):
        raise ValueError("use earliest or latest")
    return raw


INPUT_FORMATS = ("text", "json")
# A JSON field's path, as measures name theirs (statestore.core.aggregation.spec): a.b.c
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


AGGREGATE_STORE_KINDS = (
    "--aggregate keeps its measures in a key-value store (partitioned-kv or global-kv), with --window per "
    "window in a partitioned-window store, or with --session-gap per session in a partitioned-session store"
)


def _input_format(raw: str) -> str:
    if raw.strip().lower() not in INPUT_FORMATS:
        raise ValueError(f"use {' or '.join(INPUT_FORMATS)}")
    return raw.strip().lower()


def _aggregate(raw: str) -> str:
    """The measures' canonical text (AggregateSpec.parse's ValueError names what it cannot read)."""
    return AggregateSpec.parse(raw).text


def _fields(raw: str) -> str:
    """FIELD[,FIELD...], each a JSON field's path; as given, without spaces."""
    fields = [part.strip() for part in raw.split(",")]
    for field in fields:
        if not _FIELD.fullmatch(field):
            raise ValueError(f"{field!r} is not a JSON field name (letters, digits and _, nested: a.b)")
    return ",".join(fields)


def _field(raw: str) -> str:
    field = raw.strip()
    if not _FIELD.fullmatch(field):
        raise ValueError(f"{field!r} is not a JSON field name (letters, digits and _, nested: a.b)")
    return field


def _expression(raw: str) -> str:
    if not raw.strip():
        raise ValueError("give a Spark SQL expression, e.g. concat(record:shop::string, '/', record:user::string)")
    return raw.strip()


def _checkpoint(raw: str) -> str:
    if not raw.strip():
        raise ValueError("give a directory or URI")
    return raw.strip()


@dataclass(frozen=True)
class StreamConfig:
    """The word-count stream: where it reads, which store it writes, how it triggers."""

    topic: str = setting(None, "STATESTORE_TOPIC", "--topic", "Kafka topic of text lines (required)", validate_topic)
    store: str = setting(
        None, "STATESTORE_STORE", "--store", "store to write the counts to (required)", validate_store_name
    )
    checkpoint: str = setting(
        None,
        "STATESTORE_CHECKPOINT",
        "--checkpoint",
        "Spark checkpoint location (offsets only; required)",
        _checkpoint,
    )
    store_type: str | None = setting(
        None,
        "STATESTORE_STORE_TYPE",
        "--store-type",
        "partitioned-kv, global-kv, their -versioned kinds or partitioned-window (default: the existing "
        "store's type, else partitioned-window with --window, else partitioned-kv)",
        _store_type,
    )
    window: int | None = setting(
        None,
        "STATESTORE_WINDOW",
        "--window",
        "count per time window of this size by Kafka record time (JSON records: their event time, "
        "--time-field), e.g. 1m (tumbling; a window store)",
        _duration("window"),
    )
    hop: int | None = setting(
        None,
        "STATESTORE_HOP",
        "--hop",
        "with --window: windows start every HOP (hopping windows; default: the window size, tumbling)",
        _duration("hop"),
    )
    session_gap: int | None = setting(
        None,
        "STATESTORE_SESSION_GAP",
        "--session-gap",
        "count per session of each word: its records no further apart than this, e.g. 5m (a session store)",
        _duration("session gap"),
    )
    grace: int | None = setting(
        None,
        "STATESTORE_GRACE",
        "--grace",
        "with --window or --session-gap: how long a window still takes late records after its end (sessions: "
        "how much older than the stream time a record may be) (default 0s)",
        _duration("grace", zero=True),
    )
    retention: int | None = setting(
        None,
        "STATESTORE_RETENTION",
        "--retention",
        "with --window or --session-gap: how long windows (sessions) are kept by stream time "
        "(default: the larger of window (gap) + grace and 1d)",
        _duration("retention"),
    )
    partitions: int | None = setting(
        None,
        "STATESTORE_PARTITIONS",
        "--partitions",
        "store partitions of a new store (default: the topic's partition count)",
        parse_positive_int,
    )
    compaction: str | None = setting(
        None,
        "STATESTORE_COMPACTION",
        "--compaction",
        "compaction strategy of a store this job creates: ucs, lcs, stcs, twcs or a class name such as "
        "UnifiedCompactionStrategy (default: the store type's, UCS for key-value stores; an existing "
        "store keeps its own)",
        compaction_class,
    )
    trigger: str = setting(
        "available-now",
        "STATESTORE_TRIGGER",
        "--trigger",
        "'available-now' (process what is there, then stop) or an interval such as '10s'",
        parse_trigger,
    )
    starting_offsets: str = setting(
        "earliest",
        "STATESTORE_STARTING_OFFSETS",
        "--starting-offsets",
        "where a new checkpoint starts reading: earliest or latest (default earliest)",
        _starting_offsets,
    )
    max_offsets_per_trigger: int | None = setting(
        None,
        "STATESTORE_MAX_OFFSETS_PER_TRIGGER",
        "--max-offsets-per-trigger",
        "cap on Kafka records per micro-batch (default: no cap)",
        parse_positive_int,
    )
    recover_from_store: bool = setting(
        False,
        "STATESTORE_RECOVER_FROM_STORE",
        "--recover-from-store",
        "with a new (empty) checkpoint, finish the store's last batch and continue from where it "
        "ended instead of refusing to start",
        parse_bool,
        switch=True,
    )
    apply_cache: bool = setting(
        True,
        "STATESTORE_APPLY_CACHE",
        "--apply-cache",
        "keep each batch's writes on the executors so the next batch reads only what they cannot vouch "
        "for, and read no window or session after the stream time (default on; the stream must be the "
        "store's only writer; --no-apply-cache reads every key, window and session from Cassandra)",
        parse_bool,
        switch=True,
    )
    driver_apply_records: int = setting(
        1000,
        "STATESTORE_DRIVER_APPLY_RECORDS",
        "--driver-apply-records",
        "a micro-batch of at most this many Kafka records is applied by the driver, with no Python tasks "
        "(default 1000; 0: every batch on the executors)",
        parse_non_negative_int,
    )
    max_future_ms: int = setting(
        DEFAULT_MAX_FUTURE_MS,
        "STATESTORE_MAX_FUTURE_MS",
        "--max-future",
        "how far a record's event time may be ahead of the batch's clock (its write time), e.g. 5m; a record "
        "further ahead is a dead letter with reason future, counted nowhere, and moves no stream time "
        "(default 5m)",
        _duration("max future"),
    )
    lease_ttl_s: float = setting(
        30.0,
        "STATESTORE_LEASE_TTL",
        "--lease-ttl",
        "seconds the store's writer lease outlives its holder (default 30); renewed every third",
        parse_positive_float,
    )
    dead_letter_retention_ms: int = setting(
        30 * 86_400_000,
        "STATESTORE_DEAD_LETTER_RETENTION",
        "--dead-letter-retention",
        "how long a dead letter is kept (the dead-letter table's TTL, set at every start), e.g. 30d; 0: "
        "forever (default 30d)",
        _duration("dead-letter retention", zero=True),
    )

    input_format: str = setting(
        "text",
        "STATESTORE_INPUT_FORMAT",
        "--input-format",
        "text (lines: the word count, the default) or json (one JSON object per record, aggregated by "
        "--aggregate per --key or --key-expr)",
        _input_format,
    )
    aggregate: str | None = setting(
        None,
        "STATESTORE_AGGREGATE",
        "--aggregate",
        "with --input-format json: the measures kept per key (with --window: per key and window), e.g. "
        "'n=count(), total=sum_int(amount), hi=max(amount)' (count, sum, sum_int, min, max, latest, distinct)",
        _aggregate,
    )
    key: str | None = setting(
        None,
        "STATESTORE_KEY",
        "--key",
        "with --input-format json: the key field(s), FIELD[,FIELD...] (one: its value as text; several: a "
        "JSON array of their values); nested fields as a.b",
        _fields,
    )
    key_expr: str | None = setting(
        None,
        "STATESTORE_KEY_EXPR",
        "--key-expr",
        "with --input-format json, instead of --key: a Spark SQL expression over the parsed `record`, e.g. "
        "concat(record:shop::string, '/', record:user::string)",
        _expression,
    )
    time_field: str | None = setting(
        None,
        "STATESTORE_TIME_FIELD",
        "--time-field",
        "with --input-format json: the field holding each record's event time, epoch milliseconds or an "
        "ISO-8601 string (default: the Kafka record timestamp)",
        _field,
    )

    def __post_init__(self) -> None:
        for name in ("topic", "store", "checkpoint"):
            if getattr(self, name) is None:
                raise ConfigError(f"{name} is required: pass --{name} or set STATESTORE_{name.upper()}")
        self._check_input()
        validate_topic(self.topic)
        validate_store_name(self.store)
        if self.compaction is not None:
            try:
                object.__setattr__(self, "compaction", compaction_class(self.compaction))
            except OptionError as exc:
                raise ConfigError(f"--compaction: {exc}") from None
            timed = self.window is not None or self.session_gap is not None
            if self.compaction == "TimeWindowCompactionStrategy" and not timed:
                raise ConfigError(
                    "--compaction twcs is for window and session stores (--window or --session-gap): a "
                    "key-value store overwrites its entries rather than ageing them out; use ucs, lcs or stcs"
                )
        if self.window is not None and self.session_gap is not None:
            raise ConfigError("give either --window or --session-gap: a store counts in windows or in sessions")
        if self.window is None and self.hop is not None:
            raise ConfigError("--hop only apply to windows: pass --window too (e.g. --window 1m)")
        if self.window is None and self.session_gap is None:
            given = [f"--{name}" for name in ("grace", "retention") if getattr(self, name) is not None]
            if given:
                raise ConfigError(
                    f"{', '.join(given)} only apply to windows: pass --window (e.g. --window 1m) or --session-gap"
                )
        kind = None if self.store_type is None else StoreType(self.store_type)
        kinds = (
            ("--window", self.window, StoreType.PARTITIONED_WINDOW),
            ("--session-gap", self.session_gap, StoreType.PARTITIONED_SESSION),
        )
        for flag, given, wanted in kinds:
            if given is not None and kind is not None and kind is not wanted:
                raise ConfigError(
                    f"{flag} counts into a {wanted} store, not a {kind} store: "
                    f"leave out --store-type or pass --store-type {wanted}"
                )
        for flag, given, wanted in kinds:
            if kind is wanted and given is None:
                raise ConfigError(f"a {kind} store counts in windows: pass {flag} (e.g. {flag} 1m)")
        try:
            self.windowing  # noqa: B018 - checks the combination (hop <= window, retention >= window + grace)
        except OptionError as exc:
            raise ConfigError(str(exc)) from None

    def _check_input(self) -> None:
        """JSON records need measures and a key; measures and keys are for JSON records only; and
        aggregate stores are key-value or window stores this round (not session stores). Values
        set in code (the DAG) are checked and made canonical as flags are."""
        try:
            for name, parse in (
                ("input_format", _input_format),
                ("aggregate", _aggregate),
                ("key", _fields),
                ("key_expr", _expression),
                ("time_field", _field),
            ):
                if getattr(self, name) is not None:
                    object.__setattr__(self, name, parse(getattr(self, name)))
        except ValueError as exc:
            raise ConfigError(f"--{name.replace('_', '-')}: {exc}") from None
        given = [f"--{n.replace('_', '-')}" for n in ("aggregate", "key", "key_expr", "time_field") if getattr(self, n)]
        if self.input_format == "text":
            if given:
                raise ConfigError(f"{', '.join(given)} need --input-format json: text lines are counted by word")
            return
        if self.aggregate is None:
            raise ConfigError("--input-format json needs --aggregate, the measures to keep, e.g. 'n=count()'")
        if (self.key is None) == (self.key_expr is None):
            raise ConfigError("--input-format json needs a key: either --key FIELD[,FIELD...] or --key-expr SQL")
        if self.store_type is not None and StoreType(self.store_type) not in AGGREGATE_STORE_TYPES:
            raise ConfigError(f"{AGGREGATE_STORE_KINDS}, not a {self.store_type} store")

    @property
    def aggregate_spec(self) -> AggregateSpec | None:
        """The measures of an aggregate store (None: the word count)."""
        return None if self.aggregate is None else AggregateSpec.parse(self.aggregate)

    @property
    def key_fields(self) -> tuple[str, ...]:
        return () if self.key is None else tuple(self.key.split(","))

    @property
    def windowing(self) -> WindowSpec | SessionSpec | None:
        """The windows or sessions to count in (None: a key-value count)."""
        if self.session_gap is not None:
            return SessionSpec(self.session_gap, self.grace or 0, self.retention)
        if self.window is None:
            return None
        # The word count keeps hopping windows as panes (a window the sum of its panes' counts);
        # aggregate stores keep a row per window.
        panes = self.aggregate is None
        return WindowSpec(self.window, self.hop, self.grace or 0, self.retention, panes=panes)
