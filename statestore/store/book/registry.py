"""The store registry: which stores a keyspace holds, their layout, and each one's progress.

One row per store in `statestore_stores`. The layout (type, partition count) is fixed when
the store is registered, with a lightweight transaction so workers starting at once agree.
The progress columns record the last micro-batch applied; a Spark checkpoint whose batch
ids are behind it has been lost or replaced (statestore.stream.job refuses to start then).

Fencing: every writer that takes a store's lease also takes the next `epoch` of the store's
row (a lightweight transaction), and its progress updates are lightweight transactions
conditional on that epoch. A writer that lost its lease while paused (a "zombie" driver)
therefore cannot record anything once a newer writer has taken over: its update is refused
(StoreFencedError) and the store's progress never goes back. Progress and epoch reads that a
writer decides on are serial reads; everything here runs on the bookkeeping profile
(QUORUM / SERIAL by default: statestore.conn.cassandra.level_for), so one replica of three may
be down.

Outside writes: a program other than the stream that changes a store's entries while a
stream may run (the expire job) marks `outside_writes` before its first change (negative: in
progress) and after its last (positive). The stream's apply cache trusts nothing across a
change of that mark (statestore.stream.apply_cache).

Input settings: how the stream reads an aggregate store's input records (`input_spec`, JSON of
InputSettings: the format, the key and the event time), recorded by the stream job when it
creates the store; null for the word count's text lines. The measures are the value format.

Fenced batch: a reset that cleared a batch begun and never recorded records its id
(`fenced_batch`), and so does a stream that starts with a batch an earlier writer began and
never recorded (which it then finishes or replays: record_fenced_batch): that batch's writer
may be paused, and once it wakes its entries and dead letters (plain writes) go on to the
store's tables by name. A drop is refused while it is
recorded (statestore.store.admin.drop_refusal); only a reset or drop whose caller says the
writer is stopped for good clears it, never a later batch (the paused writer may wake after
any number of them).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from statestore.conn.cassandra import (
    BOOKKEEPING_PROFILE,
    DDL_PROFILE,
    add_missing_columns,
    bookkeeping_profile,
    prepare,
    require_keyspace,
    serial_read,
    table_metadata,
)
from statestore.core.codecs import canonical_name, millis_of
from statestore.core.errors import StoreFencedError, StoreMismatchError, StoreNotFoundError
from statestore.core.model import StoreSpec, StoreType
from statestore.core.names import table_generation, validate_keyspace, validate_store_name
from statestore.core.windows import SessionSpec, WindowSpec

REGISTRY_TABLE = "statestore_stores"
# The schema version this release registers stores at (statestore.store.book.schema: the rules).
CURRENT_SCHEMA_VERSION = 3


@dataclass(frozen=True)
class BatchRules:
    """The settings of a run that decide what a batch counts, recorded when the batch begins
    (`pending_rules`) so that its replay decides the same, whatever the run that replays it was
    given: the future limit's `max_future_ms` (--max-future) and the store's `retention_ms`
    (its cutoff: statestore.core.retention). None: no retention."""

    max_future_ms: int
    retention_ms: int | None

    def as_json(self) -> str:
        return json.dumps({"max_future_ms": self.max_future_ms, "retention_ms": self.retention_ms}, sort_keys=True)

    @classmethod
    def parse_stored(cls, text: str | None) -> BatchRules | None:
        """The rules of the registry column (None or empty: none recorded)."""
        if not text:
            return None
        rules = json.loads(text)
        return cls(max_future_ms=rules["max_future_ms"], retention_ms=rules["retention_ms"])


@dataclass(frozen=True)
class InputSettings:
    """How the stream reads a store's input records, recorded with the store (`input_spec`) so
    that a run with other settings is refused and maintenance can recompute the store: the
    format (json), the key (fields, or a Spark SQL expression over the parsed record) and the
    event time's field (None: the Kafka timestamp). No record (null): text lines, the word count."""

    format: str
    key_fields: tuple[str, ...] = ()
    key_expr: str | None = None
    time_field: str | None = None

    def as_json(self) -> str:
        settings = {"format": self.format, "key": list(self.key_fields) or None, "key_expr": self.key_expr}
        return json.dumps({**settings, "time_field": self.time_field}, sort_keys=True)

    @classmethod
    def parse_stored(cls, text: str | None) -> InputSettings | None:
        """The settings of the registry column (None or empty: none recorded)."""
        if not text:
            return None
        settings = json.loads(text)
        return cls(
            settings["format"], tuple(settings.get("key") or ()), settings.get("key_expr"), settings.get("time_field")
        )

    @property
    def recomputable(self) -> bool:
        """Whether maintenance can recompute the store from its topic alone: JSON records read as
        recorded here, not a user's own query (whose transforms only the user's code knows)."""
        return self.format == "json"

    def describe(self) -> str:
        """The settings as the job's flags give them, e.g. `--key shop --time-field ts`."""
        key = f"--key-expr {self.key_expr!r}" if self.key_expr else f"--key {','.join(self.key_fields)}"
        time = f"--time-field {self.time_field}" if self.time_field else "the Kafka timestamp as event time"
        return f"--input-format {self.format} {key}, {time}"


@dataclass(frozen=True)
class StoreProgress:
    last_batch_id: int | None
    last_batch_at: datetime | None
    max_event_time: datetime | None
    source_topic: str | None
    query_id: str | None
    batch_base: int
    offsets: str | None
    pending_batch_id: int | None
    pending_ts: int | None
    pending_offsets: str | None
    last_ts: int | None
    epoch: int | None = None
    outside_writes: int | None = None
    topic_id: str | None = None  # the Kafka id of source_topic when the stream last started
    retention_ms: int | None = None  # the store's retention now (statestore.core.retention)
    # Epoch ms until which rows written under a table TTL may still expire (record_ttl_expiry).
    ttl_expiring_until: int | None = None
    # The rules the pending batch began under (None: none recorded, or begun by an earlier release).
    pending_rules: BatchRules | None = None
    # How the stream reads the store's input records (None: none recorded: text lines, the word count).
    input_settings: InputSettings | None = None
    # The batch a reset cleared while it was begun and not recorded: its writer may be paused (None: none).
    fenced_batch: int | None = None

    @property
    def has_batches(self) -> bool:
        return self.last_batch_id is not None or self.pending_batch_id is not None

    @property
    def unfinished_batch(self) -> int | None:
        """The batch begun and never recorded (a writer crashed or paused in it), if any."""
        pending, last = self.pending_batch_id, self.last_batch_id
        return pending if pending is not None and (last is None or pending > last) else None


@dataclass(frozen=True, repr=False)
class KafkaOffsets:
    """Offsets in Kafka, per topic and partition: where a batch starts, or where it ends
    (exclusive). Parsed once from Spark's JSON, `{"topic": {"partition": offset}}`; as_json()
    gives it back compact with sorted keys, the text the registry keeps and the Kafka source
    takes as `startingOffsets`. Two are equal when they name the same offsets, however their
    JSON was spaced or ordered."""

    # ((topic, ((partition, offset), ...)), ...), sorted as the JSON's keys are (partitions are strings there).
    by_topic: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]

    @classmethod
    def of(cls, offsets: Mapping[str, Mapping[str, int]]) -> KafkaOffsets:
        """The offsets of a mapping of that shape; ValueError for anything else."""
        if not isinstance(offsets, Mapping) or not all(isinstance(p, Mapping) for p in offsets.values()):
            raise ValueError(f"not Kafka offsets (per topic, per partition): {str(offsets)[:200]}")
        return cls(tuple(sorted((topic, tuple(sorted(parts.items()))) for topic, parts in offsets.items())))

    @classmethod
    def parse(cls, text: str) -> KafkaOffsets:
        """The offsets of Spark's JSON text; ValueError when it is not JSON of that shape."""
        return cls.of(json.loads(text))

    @classmethod
    def parse_stored(cls, text: str | None) -> KafkaOffsets | None:
        """The offsets of a registry column (None or empty: none recorded)."""
        return cls.parse(text) if text else None

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(topic for topic, _ in self.by_topic)

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {topic: dict(partitions) for topic, partitions in self.by_topic}

    def as_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))

    def __repr__(self) -> str:
        return f"KafkaOffsets({self.as_json()})"


@dataclass(frozen=True, kw_only=True)
class BatchPosition:
    """Where one batch stands, built once per batch: what begin_batch records before any of its
    writes and record_batch once it is applied.

    `batch_id` is the store's id of the batch: Spark's batch id plus the store's `batch_base`
    (ids only grow, even across a checkpoint recovered from the store). `write_ts` is the write
    timestamp of all its writes (a replay reuses it). It reads Kafka from `start` up to `end`
    (None only where a tool seeds a registry by hand), for query `query_id`.
    """

    batch_id: int
    write_ts: int
    start: KafkaOffsets | None
    end: KafkaOffsets | None
    query_id: str | None = None
    batch_base: int = 0
    spark_batch_id: int | None = None  # None: a pending batch finished from the store's own record
    stream_time_ms: int | None = None  # the store's stream time before the batch (window stores: closed windows)
    retention_ms: int | None = None  # the store's retention when the batch began: its cutoff is stream time - this
    max_future_ms: int | None = None  # the future limit's distance when the batch began (None: the run's)

    @property
    def rules(self) -> BatchRules | None:
        """The rules begin_batch records (None: the position has no --max-future of its own)."""
        return None if self.max_future_ms is None else BatchRules(self.max_future_ms, self.retention_ms)


def create_cql(keyspace: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {validate_keyspace(keyspace)}.{REGISTRY_TABLE} ("
        " name text PRIMARY KEY, store_type text, table_name text, partitions int,"
        " key_format text, value_format text, created_at timestamp, source_topic text,"
        " last_batch_id bigint, last_batch_at timestamp, max_event_time timestamp, query_id text,"
        " batch_base bigint, offsets text, pending_batch_id bigint, pending_ts bigint, pending_offsets text,"
        " last_ts bigint, epoch bigint, outside_writes bigint, windowing text, topic_id text, schema_version int,"
        " pending_rules text, input_spec text, fenced_batch bigint)"
        " WITH comment = 'statestore: the stores of this keyspace and their progress'"
    )


# Columns a registry made by an older release lacks (fencing epochs, outside-write marks,
# windowing, the topic's id, sub-partitions, retention, the TTL horizon, schema versions, the
# pending batch's rules, the input settings, the batch a reset fenced). input_spec needs no new
# schema version: a store without it is read as the word count's text lines, which is what every
# earlier store is; nor does fenced_batch: a store without it is one no reset fenced a batch of.
_LATER_COLUMNS = (
    ("epoch", "bigint"),
    ("outside_writes", "bigint"),
    ("windowing", "text"),
    ("topic_id", "text"),
    ("subpartitions", "int"),
    ("retention_ms", "bigint"),
    ("ttl_expiring_until", "bigint"),
    ("schema_version", "int"),
    ("pending_rules", "text"),
    ("input_spec", "text"),
    ("fenced_batch", "bigint"),
)


def ensure_table(session, keyspace: str, ddl_profile: object = DDL_PROFILE) -> tuple[str, ...]:
    """Create the registry, or add the columns an older release's lacks (idempotent); returns
    the columns added, as table.column."""
    session.execute(create_cql(keyspace), execution_profile=ddl_profile)
    return add_missing_columns(session, keyspace, REGISTRY_TABLE, _LATER_COLUMNS, ddl_profile)


def _spec(keyspace: str, row) -> StoreSpec:
    windowing = getattr(row, "windowing", None)
    return StoreSpec(
        keyspace,
        row.name,
        StoreType(row.store_type),
        row.partitions,
        row.table_name,
        canonical_name(row.key_format or "string"),
        canonical_name(row.value_format or "long"),
        _windowing_of(StoreType(row.store_type), windowing),
        subpartitions=getattr(row, "subpartitions", None) or 1,
        retention_ms=getattr(row, "retention_ms", None),
    )


def _windowing_of(store_type: StoreType, text: str | None) -> WindowSpec | SessionSpec | None:
    if text is None:
        return None
    settings = json.loads(text)
    return SessionSpec(**settings) if store_type.sessioned else WindowSpec(**settings)


def _windowing_text(spec: StoreSpec) -> str | None:
    return None if spec.windowing is None else json.dumps(spec.windowing.as_dict(), sort_keys=True)


def register(session, spec: StoreSpec, source_topic: str | None = None) -> StoreSpec:
    """Register `spec` unless the store exists; return the registered spec.

    An existing store with another type or partition count is an error: its data is laid
    out for that shape, and silently changing it would scatter keys. The insert is DML (a
    lightweight transaction) on the bookkeeping profile, not the DDL one: it needs a quorum,
    not every replica, so a store can be created with one replica of three down.
    """
    insert = prepare(
        session,
        f"INSERT INTO {spec.keyspace}.{REGISTRY_TABLE} (name, store_type, table_name, partitions,"
        " key_format, value_format, created_at, source_topic, windowing, subpartitions, schema_version)"
        " VALUES (?, ?, ?, ?, ?, ?, toTimestamp(now()), ?, ?, ?, ?) IF NOT EXISTS",
    )
    row = session.execute(
        insert,
        (
            spec.name,
            spec.store_type.value,
            spec.table,
            spec.partitions,
            spec.key_codec,
            spec.value_codec,
            source_topic,
            _windowing_text(spec),
            spec.subpartitions,
            CURRENT_SCHEMA_VERSION,
        ),
        execution_profile=bookkeeping_profile(session),
    ).one()
    if row.applied:
        return spec
    existing = _spec(spec.keyspace, row)
    if table_generation(existing.table)[0] == table_generation(spec.table)[0]:
        spec = replace(spec, table_name=existing.table)  # a reset moved it on (move_table): the same store
    if existing.layout != spec.layout:
        raise StoreMismatchError(
            f"store '{spec.name}' already exists as {existing.store_type.value} with "
            f"{existing.partitions} partition(s) x {existing.subpartitions} sub-partition(s) in table "
            f"{existing.table}; it cannot be reopened as {spec.store_type.value} with {spec.partitions} x "
            f"{spec.subpartitions} in table {spec.table}. Use another store name, or omit "
            "--store-type/--partitions/--subpartitions to reuse the store as it is (`statestore relayout` "
            "changes its sub-partitions)."
        )
    if existing.windowing != spec.windowing and existing.windowing is not None:
        raise StoreMismatchError(
            f"store '{spec.name}' counts in windows or sessions of {_windowing_text(existing)}; it cannot be "
            f"reopened with {_windowing_text(spec)}. Use another store name, or the store's own settings."
        )
    if (existing.key_codec, existing.value_codec) != (spec.key_codec, spec.value_codec):
        raise StoreMismatchError(
            f"store '{spec.name}' holds {existing.key_codec} keys and {existing.value_codec} values; it "
            f"cannot be reopened with {spec.key_codec} keys and {spec.value_codec} values"
        )
    return existing


def _row(session, keyspace: str, name: str):
    """Store `name`'s registry row; StoreNotFoundError when there is none."""
    validate_store_name(name)
    if table_metadata(session, keyspace, REGISTRY_TABLE) is None:
        require_keyspace(session, keyspace)  # a keyspace that does not exist is named as such (exit 3 too)
        raise StoreNotFoundError(f"no store '{name}' in keyspace '{keyspace}': it holds no stores yet")
    row = session.execute(
        prepare(session, f"SELECT * FROM {validate_keyspace(keyspace)}.{REGISTRY_TABLE} WHERE name = ?"),
        (name,),
    ).one()
    if row is None:
        raise StoreNotFoundError(f"no store '{name}' in keyspace '{keyspace}' (see `statestore stores` for the list)")
    return row


def lookup(session, keyspace: str, name: str) -> StoreSpec:
    return _spec(keyspace, _row(session, keyspace, name))


def stored_schema_version(session, keyspace: str, name: str) -> int | None:
    """The schema version recorded for store `name` (None: none recorded, as before versions
    existed; statestore.store.book.schema has the rules); StoreNotFoundError when unregistered."""
    return getattr(_row(session, keyspace, name), "schema_version", None)


def record_schema_version(session, keyspace: str, name: str, version: int) -> None:
    """Record store `name`'s schema version (a lightweight transaction: never a row for a store
    dropped meanwhile)."""
    update = prepare(
        session,
        f"UPDATE {validate_keyspace(keyspace)}.{REGISTRY_TABLE} SET schema_version = ? WHERE name = ? IF EXISTS",
    )
    row = session.execute(update, (version, name), execution_profile=bookkeeping_profile(session)).one()
    if not row.applied:
        raise StoreNotFoundError(f"no store '{name}' in keyspace '{keyspace}': it was dropped during the migration")


def input_settings(session, keyspace: str, name: str) -> InputSettings | None:
    """How store `name` reads its input records (None: text lines, or none recorded yet);
    StoreNotFoundError when unregistered."""
    return InputSettings.parse_stored(getattr(_row(session, keyspace, name), "input_spec", None))


def record_input_settings(session, spec: StoreSpec, settings: InputSettings) -> InputSettings:
    """Record `settings` as store `spec`'s input settings unless some are recorded already;
    returns those the store has now. A lightweight transaction conditional on none recorded
    and on the store's value format (so never a row for a store dropped meanwhile): of two jobs
    creating a store at once, the first one's settings stay."""
    update = prepare(
        session,
        f"UPDATE {spec.keyspace}.{REGISTRY_TABLE} SET input_spec = ? WHERE name = ?"
        " IF input_spec = null AND value_format = ?",
    )
    row = session.execute(
        update, (settings.as_json(), spec.name, spec.value_codec), execution_profile=bookkeeping_profile(session)
    ).one()
    if row.applied:
        return settings
    recorded = InputSettings.parse_stored(getattr(row, "input_spec", None))
    if recorded is None:
        raise StoreNotFoundError(
            f"store '{spec.name}' is no longer registered with values {spec.value_codec}: it was dropped or "
            "replaced meanwhile"
        )
    return recorded


def find(session, keyspace: str, name: str) -> StoreSpec | None:
    try:
        return lookup(session, keyspace, name)
    except StoreNotFoundError:
        return None


def list_stores(session, keyspace: str) -> list[tuple[StoreSpec, StoreProgress]]:
    rows = session.execute(f"SELECT * FROM {validate_keyspace(keyspace)}.{REGISTRY_TABLE}")
    stores = [(_spec(keyspace, r), _progress(r)) for r in rows]
    return sorted(stores, key=lambda pair: pair[0].name)


def _progress(row) -> StoreProgress:
    return StoreProgress(
        row.last_batch_id,
        row.last_batch_at,
        row.max_event_time,
        row.source_topic,
        row.query_id,
        row.batch_base or 0,
        row.offsets,
        row.pending_batch_id,
        row.pending_ts,
        row.pending_offsets,
        row.last_ts,
        getattr(row, "epoch", None),
        getattr(row, "outside_writes", None),
        getattr(row, "topic_id", None),
        retention_ms=getattr(row, "retention_ms", None),
        ttl_expiring_until=getattr(row, "ttl_expiring_until", None),
        pending_rules=BatchRules.parse_stored(getattr(row, "pending_rules", None)),
        input_settings=InputSettings.parse_stored(getattr(row, "input_spec", None)),
        fenced_batch=getattr(row, "fenced_batch", None),
    )


def progress(session, keyspace: str, name: str) -> StoreProgress:
    """The store's progress, read serially: every committed update of any writer is in it.
    Every column (`*`): a registry an earlier release made lacks the later ones until it is
    migrated (statestore.store.book.schema), and readers still read its stores meanwhile."""
    select = prepare(session, f"SELECT * FROM {validate_keyspace(keyspace)}.{REGISTRY_TABLE} WHERE name = ?")
    row = serial_read(session, select, (validate_store_name(name),)).one()
    if row is None:
        raise StoreNotFoundError(f"no store '{name}' in keyspace '{keyspace}'")
    return _progress(row)


def first_epoch() -> int:
    """A store's first epoch: random in [1, 2**62), not 1. A store dropped and created again
    under its name starts a new sequence of epochs, so a writer of the dropped one (paused while
    it was dropped, its lease lapsed) never finds its own epoch current again: epochs counted
    from 1 in both stores made the new store accept that writer's updates."""
    return secrets.randbelow(2**62 - 1) + 1


def take_epoch(session, spec: StoreSpec) -> int:
    """Take the store's next epoch for a writer that now holds its lease (see the module doc).
    Every earlier writer's progress updates are refused from now on. Returns the new epoch."""
    take = prepare(session, f"UPDATE {spec.keyspace}.{REGISTRY_TABLE} SET epoch = ? WHERE name = ? IF epoch = ?")
    while True:
        current = progress(session, spec.keyspace, spec.name).epoch
        epoch = first_epoch() if current is None else current + 1
        row = session.execute(take, (epoch, spec.name, current), execution_profile=BOOKKEEPING_PROFILE).one()
        if row.applied:
            return epoch
        # Another writer took an epoch in between (it holds no lease then: its updates fail).


def _fenced(session, update, params: tuple, spec: StoreSpec, epoch: int | None, what: str) -> None:
    """Run a progress update, conditional on `epoch` (None: unconditional, for tools that seed
    a registry outside any stream); StoreFencedError when a newer writer took the store."""
    if epoch is None:
        session.execute(update, params, execution_profile=BOOKKEEPING_PROFILE)
        return
    row = session.execute(update, (*params, epoch), execution_profile=BOOKKEEPING_PROFILE).one()
    if not row.applied:
        raise _fenced_off(spec, epoch, getattr(row, "epoch", None), what)


def _fenced_off(spec: StoreSpec, epoch: int, newer: int | None, what: str) -> StoreFencedError:
    return StoreFencedError(
        f"store '{spec.name}': this writer (epoch {epoch}) was fenced off while {what}: the store was taken "
        f"over by a newer writer (epoch {newer}), so nothing more is recorded by this "
        "one. It lost its lease (paused longer than the lease TTL?); the newer writer carries on."
    )


def check_epoch(session, spec: StoreSpec, epoch: int, what: str) -> None:
    """StoreFencedError unless the store's epoch, read serially, is still `epoch`: for a step no
    lightweight transaction can make conditional (a TRUNCATE), run right before it."""
    _, current = registered_table(session, spec.keyspace, spec.name)
    if current != epoch:
        raise _fenced_off(spec, epoch, current, what)


def begin_batch(session, spec: StoreSpec, position: BatchPosition, epoch: int | None) -> None:
    """Record the batch at `position` before any of its writes: its write timestamp (a replay
    reuses it, every later batch gets a larger one), the offsets it reads (so a lost
    checkpoint can still complete it) and the rules it counts by (BatchRules: a replay keeps
    them). `offsets`, the store's position, is where the batch starts. Refused
    (StoreFencedError) unless the store's epoch is still `epoch`."""
    update = prepare(
        session,
        f"UPDATE {spec.keyspace}.{REGISTRY_TABLE} SET pending_batch_id = ?, pending_ts = ?, offsets = ?,"
        " pending_offsets = ?, query_id = ?, batch_base = ?, pending_rules = ? WHERE name = ?"
        + _IF_EPOCH[epoch is None],
    )
    rules = position.rules
    params = (
        position.batch_id,
        position.write_ts,
        _offsets_text(position.start),
        _offsets_text(position.end),
        position.query_id,
        position.batch_base,
        None if rules is None else rules.as_json(),
        spec.name,
    )
    _fenced(session, update, params, spec, epoch, f"beginning batch {position.batch_id}")


def record_batch(
    session, spec: StoreSpec, position: BatchPosition, max_event_time_ms: int | None, epoch: int | None = None
) -> None:
    """Mark the batch at `position` applied, with the Kafka offsets it ended at (the store's
    position).

    A replayed batch writes the same values again. max_event_time only ever grows (a batch
    with no events leaves it as it was). Refused (StoreFencedError) unless the store's epoch is
    still `epoch` (None: unconditional, for tools that seed a registry).
    """
    current = progress(session, spec.keyspace, spec.name).max_event_time
    if max_event_time_ms is None or (current is not None and millis_of(current) >= max_event_time_ms):
        max_event_time_ms = None if current is None else millis_of(current)
    update = prepare(
        session,
        f"UPDATE {spec.keyspace}.{REGISTRY_TABLE} SET last_batch_id = ?, last_ts = ?, offsets = ?,"
        " max_event_time = ?, last_batch_at = toTimestamp(now()) WHERE name = ?" + _IF_EPOCH[epoch is None],
    )
    params = (position.batch_id, position.write_ts, _offsets_text(position.end), max_event_time_ms, spec.name)
    _fenced(session, update, params, spec, epoch, f"recording batch {position.batch_id}")


def _offsets_text(offsets: KafkaOffsets | None) -> str | None:
    return None if offsets is None else offsets.as_json()


def record_topic_id(session, spec: StoreSpec, topic_id: str, epoch: int) -> None:
    """Keep the Kafka id of the store's source topic, as the writer of `epoch`: offsets the
    store recorded name records of that topic only, not of one created again under its name."""
    update = prepare(session, f"UPDATE {spec.keyspace}.{REGISTRY_TABLE} SET topic_id = ? WHERE name = ? IF epoch = ?")
    _fenced(session, update, (topic_id, spec.name), spec, epoch, "recording its source topic")


# How far past now + TTL the registry's expiry mark is set (ttl_expiry_to_record): it covers the
# writes of the batch that sets it, which come after its `now`, and is renewed once per this span.
TTL_MARK_AHEAD_S = 3_600.0


def ttl_expiry_to_record(table_ttl_s: int | None, now_s: float, recorded_until_s: float | None) -> float | None:
    """Pure: the time (wall-clock seconds) to record in the store's registry as the end of the
    span in which its rows written under the table's TTL may expire, or None to leave the
    recorded one. Recorded ahead (TTL_MARK_AHEAD_S past now + TTL, at most twice that) and
    renewed once now + TTL comes within TTL_MARK_AHEAD_S of it: one registry write an hour
    while the table has a TTL, and the rows written until then expire before the mark. The
    stream records it before a batch under a TTL (statestore.stream.apply_cache), and
    statestore.store.admin.alter_store before it sets one."""
    if not table_ttl_s:
        return None
    if recorded_until_s is not None and recorded_until_s >= now_s + table_ttl_s + TTL_MARK_AHEAD_S:
        return None
    return now_s + table_ttl_s + 2 * TTL_MARK_AHEAD_S


def record_ttl_expiry(session, spec: StoreSpec, until_ms: int) -> None:
    """Record that rows of the store written under a table TTL may expire until `until_ms`
    (epoch ms), so a later run, even one that never sees that TTL (removed in between), knows
    its apply cache cannot vouch for them before then (statestore.stream.apply_cache). Only
    ever moved later by its caller; a plain write: a fenced writer recording it costs only trust."""
    update = prepare(session, f"UPDATE {spec.keyspace}.{REGISTRY_TABLE} SET ttl_expiring_until = ? WHERE name = ?")
    session.execute(update, (until_ms, spec.name), execution_profile=BOOKKEEPING_PROFILE)


def mark_outside_writes(session, spec: StoreSpec, ongoing: bool, now_us: int) -> None:
    """Mark the store as changed by a program other than its stream: before the first change
    (`ongoing`, stored negative) and after the last (positive). See the module doc."""
    update = prepare(session, f"UPDATE {spec.keyspace}.{REGISTRY_TABLE} SET outside_writes = ? WHERE name = ?")
    session.execute(update, (-now_us if ongoing else now_us, spec.name), execution_profile=BOOKKEEPING_PROFILE)


# The condition of a fenced progress update (see _fenced), by "unfenced".
_IF_EPOCH = {False: " IF epoch = ?", True: ""}


def clear_progress(
    session, spec: StoreSpec, epoch: int | None = None, floor_ts: int | None = None, fenced_batch: int | None = None
) -> None:
    """Forget every batch and position (after the store's data was truncated), as the writer
    of `epoch` (StoreFencedError once a newer writer took the store; None: unconditional).
    `floor_ts` stays as `last_ts`: the next batch's write timestamp is above it (see
    statestore.store.admin.truncate_store, whose shadowing deletes are at that timestamp).
    `fenced_batch` is recorded as the batch whose writer may still be paused (None: none;
    admin.fenced_after_reset)."""
    update = prepare(
        session,
        f"UPDATE {spec.keyspace}.{REGISTRY_TABLE} SET last_batch_id = null, last_ts = ?, fenced_batch = ?,"
        " offsets = null,"
        " pending_batch_id = null, pending_ts = null, pending_offsets = null, pending_rules = null, query_id = null,"
        " batch_base = null, max_event_time = null, last_batch_at = null WHERE name = ?" + _IF_EPOCH[epoch is None],
    )
    _fenced(session, update, (floor_ts, fenced_batch, spec.name), spec, epoch, "clearing its progress")


def record_fenced_batch(session, spec: StoreSpec, batch_id: int, epoch: int) -> None:
    """Record `batch_id`, begun by an earlier writer and never recorded, as the store's fenced
    batch, as the writer of `epoch` (which took the store over from it; StoreFencedError once a
    newer one did): that writer may still be paused mid-batch (module doc, Fenced batch)."""
    update = prepare(
        session, f"UPDATE {spec.keyspace}.{REGISTRY_TABLE} SET fenced_batch = ? WHERE name = ? IF epoch = ?"
    )
    _fenced(session, update, (batch_id, spec.name), spec, epoch, f"recording batch {batch_id} as fenced")


def swap_table(session, spec: StoreSpec, table: str, subpartitions: int, epoch: int) -> None:
    """Point the store at `table` laid out with `subpartitions` (statestore.store.relayout, once
    the table holds a verified copy), as the holder of `epoch`. A lightweight transaction
    conditional on the table the store had and on that epoch: StoreFencedError once a newer
    writer took the store, StoreMismatchError when someone else changed its table meanwhile.
    A timeout leaves its outcome unknown: registered_table settles it."""
    _swap(session, spec, table, {"subpartitions": subpartitions}, epoch)


def swap_windowing(session, spec: StoreSpec, table: str, windowing: WindowSpec, epoch: int) -> None:
    """Point the store at `table` read with `windowing` (statestore.store.migration: a hopping
    window store turned into panes, once the table holds a verified copy), as the holder of
    `epoch`: the table and the windowing change in one step, conditional as swap_table's."""
    _swap(session, spec, table, {"windowing": _windowing_text(replace(spec, windowing=windowing))}, epoch)


def _swap(session, spec: StoreSpec, table: str, columns: dict[str, object], epoch: int) -> None:
    """Set the store's table and `columns` IF its table is still spec's AND its epoch `epoch`."""
    update = prepare(
        session,
        f"UPDATE {spec.keyspace}.{REGISTRY_TABLE} SET table_name = ?, {', '.join(f'{c} = ?' for c in columns)}"
        " WHERE name = ? IF table_name = ? AND epoch = ?",
    )
    row = session.execute(
        update,
        (table, *columns.values(), spec.name, spec.table, epoch),
        execution_profile=bookkeeping_profile(session),
    ).one()
    if not row.applied and getattr(row, "epoch", epoch) != epoch:
        raise _fenced_off(spec, epoch, row.epoch, f"switching to table {table}")
    if not row.applied:
        raise StoreMismatchError(
            f"store '{spec.name}' no longer uses table {spec.table} (now {getattr(row, 'table_name', None)}): "
            "it was changed by someone else; nothing was swapped"
        )


def registered_table(session, keyspace: str, name: str) -> tuple[str, int | None]:
    """The table store `name` uses and its epoch, read serially: a lightweight transaction whose
    outcome a timeout left unknown (a swap_table) has applied once this reads it, or never will,
    which a plain read at a quorum does not tell."""
    select = prepare(
        session, f"SELECT table_name, epoch FROM {validate_keyspace(keyspace)}.{REGISTRY_TABLE} WHERE name = ?"
    )
    row = serial_read(session, select, (validate_store_name(name),)).one()
    if row is None:
        raise StoreNotFoundError(f"no store '{name}' in keyspace '{keyspace}'")
    return row.table_name, row.epoch


def move_table(session, spec: StoreSpec, table: str, epoch: int) -> StoreSpec:
    """Point the store at `table`, a new generation of its table made by a reset, as the writer
    of `epoch` (StoreFencedError once a newer writer took the store). Returns the moved spec;
    `register` accepts a spec of any generation of the store's table as this store."""
    update = prepare(session, f"UPDATE {spec.keyspace}.{REGISTRY_TABLE} SET table_name = ? WHERE name = ? IF epoch = ?")
    _fenced(session, update, (table, spec.name), spec, epoch, f"moving the store to table {table}")
    return replace(spec, table_name=table)


def unregister(session, keyspace: str, name: str) -> None:
    """Forget a store (after its tables were dropped): DML on the bookkeeping profile."""
    delete = prepare(session, f"DELETE FROM {validate_keyspace(keyspace)}.{REGISTRY_TABLE} WHERE name = ?")
    session.execute(delete, (validate_store_name(name),), execution_profile=bookkeeping_profile(session))


def record_retention(session, keyspace: str, name: str, retention_ms: int | None) -> None:
    """Set the store's retention (None: none), on the bookkeeping profile. Readers that open the
    store from now on, and the stream from its next batch, judge entries by it
    (statestore.core.retention); StoreNotFoundError when no such store is registered."""
    update = prepare(
        session, f"UPDATE {validate_keyspace(keyspace)}.{REGISTRY_TABLE} SET retention_ms = ? WHERE name = ? IF EXISTS"
    )
    row = session.execute(update, (retention_ms, validate_store_name(name)), execution_profile=BOOKKEEPING_PROFILE)
    if not row.one().applied:
        raise StoreNotFoundError(f"no store '{name}' in keyspace '{keyspace}' (see `statestore stores` for the list)")


def stream_time_query(session, keyspace: str, name: str) -> tuple[object, tuple]:
    """The statement and parameters that read a store's stream time (its max_event_time) for a
    reader: one registry row, a plain read (not serial: a reader needs no writer's last word)."""
    select = prepare(
        session, f"SELECT max_event_time FROM {validate_keyspace(keyspace)}.{REGISTRY_TABLE} WHERE name = ?"
    )
    select.is_idempotent = True
    return select, (name,)


def stream_time_of(row) -> int | None:
    """The stream time (epoch ms) in a row of stream_time_query (None: no row, or none yet)."""
    return None if row is None or row.max_event_time is None else millis_of(row.max_event_time)
