"""Your own query into an aggregate store: a streaming DataFrame of yours (Spark's Kafka source,
then any stateless transforms: parse, filter, join with a static table) kept as measures per key,
exactly once, with the job's lease, checkpoint checks, registry position, dead letters and
stream log.

    from statestore.stream import start_aggregation

    orders = spark.readStream.format("kafka").option("subscribe", "orders")...load()
    mine = orders.select("topic", "partition", "offset", "timestamp", parsed...).filter(...)
    running = start_aggregation(mine, store="revenue", measures="n=count(), total=sum_int(amount)",
                                key="shop", checkpoint="/checkpoints/revenue")
    running.await_termination()

How it maps: before the query starts, the key, the event time and each field a measure reads
become columns of the user's frame (`statestore_*`), typed as the measures take them; each batch
of that frame then becomes the rows json_input.parsed_records makes of JSON records (key, time_ms,
partition, offset, one typed column per field, reason, detail), which the aggregate stage
(statestore.stream.aggregates) applies as it applies the job's. A null key or field is a dead
letter (missing_key, missing_field), never a silent zero; a column whose Spark type no measure
that reads it can take is refused before anything starts (ConfigError).

The rule the user's transforms must keep, as the job's own do: a batch replayed after a crash
reads the same Kafka offsets and must give the same rows (no rand(), no current_timestamp(), no
static table changing under a running query), else a replay completes a batch with other rows.
Spark's checkpoint has one source: a query with more than one streaming source is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from statestore.core import config as cfg
from statestore.core.aggregation import AggregateSpec
from statestore.core.aggregation.kinds import ANY_VALUE, INTEGER, NUMBER
from statestore.core.config import CassandraConfig, KafkaConfig, StreamConfig
from statestore.core.errors import ConfigError
from statestore.core.model import MAX_KEY_BYTES
from statestore.store.book import deadletters, registry
from statestore.stream.job import JobConfig, RunningStream, _store_error_message, start_query
from statestore.stream.json_input import DETAIL, KEY, REASON, TIME_MS, value_columns
from statestore.stream.transforms import FUTURE_LIMIT, after_future_limit
from statestore.stream.writer import SHIPPED, BatchSeams

_log = logging.getLogger("statestore.stream.own_query")

# The input format an own query's store records (registry.InputSettings.format; the job's is json).
OWN_QUERY_FORMAT = "own-query"
# The Kafka source's columns the user's frame must keep: where each row comes from.
KAFKA_COLUMNS = ("topic", "partition", "offset")
# The columns start_aggregation adds to the user's frame (prefixed: the user's own names stay free).
_KEY, _TIME, _RAW, _TS = "statestore_key", "statestore_time_ms", "statestore_raw", "statestore_ts_ms"

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_TAKES = {
    INTEGER: "integers (tinyint, smallint, int, bigint, or decimal(p,0))",
    NUMBER: "numbers (any integer, decimal, float or double type)",
}


@dataclass(frozen=True)
class ColumnRecords:
    """The input stage of a user's own query (writer.OwnRecords): the measures, what the key and
    the time are (for dead letters' details), and whether the time is the user's column."""

    aggregate: AggregateSpec
    key_text: str
    time_text: str | None = None  # None: the Kafka record timestamp

    def parsed_records(self, batch_df):
        """A batch of the staged frame (stage()) as json_input.parsed_records's rows: (key, time_ms,
        partition, offset, v0, v1, ..., reason, detail, topic, ts_ms, raw); the typed values are
        null on a row with a reason."""
        checks = _checks(self, batch_df.columns)
        verdict = F.lit(None).cast("struct<reason: string, detail: string>")
        for condition, why, text in reversed(checks):  # the first check that holds wins
            hit = F.coalesce(condition, F.lit(False))
            verdict = F.when(hit, F.struct(F.lit(why).alias(REASON), text.alias(DETAIL))).otherwise(verdict)
        judged = batch_df.select("*", verdict.alias("statestore_verdict"))
        good = F.col(f"statestore_verdict.{REASON}").isNull()
        values = [F.when(good, F.col(_value(name))).alias(name) for name in value_columns(self.aggregate).values()]
        return judged.select(
            F.col(_KEY).alias(KEY),
            F.col(_TIME).alias(TIME_MS),
            "partition",
            "offset",
            *values,
            F.col(f"statestore_verdict.{REASON}").alias(REASON),
            F.col(f"statestore_verdict.{DETAIL}").alias(DETAIL),
            "topic",
            F.col(_TS).alias("ts_ms"),
            F.col(_RAW).alias("raw"),
        )


def _value(name: str) -> str:
    return f"statestore_{name}"


def _given(name: str) -> str:
    return f"statestore_{name}_given"


def _checks(records: ColumnRecords, columns: list[str]) -> list[tuple]:
    """(condition, reason, detail) of every check, in order: the first that holds is the row's."""
    key, what = F.col(_KEY), f"the key {records.key_text}"
    checks: list[tuple] = [
        (key.isNull(), deadletters.MISSING_KEY, F.lit(f"{what} is null; nothing of the record was counted")),
        (F.length(key) == 0, deadletters.MISSING_KEY, F.lit(f"{what} is empty; nothing of the record was counted")),
        (
            F.octet_length(key) > MAX_KEY_BYTES,
            deadletters.KEY_TOO_LONG,
            F.format_string(
                f"the key is %d bytes, over the {MAX_KEY_BYTES}-byte key limit; nothing of the record was counted",
                F.octet_length(key),
            ),
        ),
    ]
    if records.time_text is not None:
        checks.append(
            (
                F.col(_TIME).isNull(),
                deadletters.MISSING_FIELD,
                F.lit(f"the time {records.time_text} is null; nothing of the record was counted"),
            )
        )
    for (field, takes), name in value_columns(records.aggregate).items():
        value = F.col(_value(name))
        checks.append(
            (
                ~F.col(_given(name)),
                deadletters.MISSING_FIELD,
                F.lit(f"field {field} is null; nothing of the record was counted"),
            )
        )
        if takes == INTEGER:  # a decimal(p,0) beyond a long
            checks.append(
                (value.isNull(), deadletters.OVERFLOW, F.lit(f"field {field}: the value does not fit a 64-bit long"))
            )
        if takes == NUMBER:
            checks += [
                (F.isnan(value), deadletters.WRONG_TYPE, F.lit(f"field {field}: expected a number, found NaN")),
                (
                    value.isin(float("inf"), float("-inf")),
                    deadletters.OVERFLOW,
                    F.format_string(f"field {field}: %s is beyond a double", value.cast("string")),
                ),
            ]
    if FUTURE_LIMIT in columns:
        checks.append(
            (
                after_future_limit(F.col(_TIME)),
                deadletters.FUTURE,
                F.format_string(
                    "its time is after %s ms, its batch's clock plus the tolerance (max_future_ms): nothing of it was "
                    "counted and it moved no stream time",
                    F.col(FUTURE_LIMIT).cast("string"),
                ),
            )
        )
    return checks


def kafka_topic(df) -> str:
    """The one topic `df` streams from; ConfigError when it is not a streaming DataFrame of
    exactly one Kafka source subscribed to one topic (Spark's checkpoint and the store's
    registry position follow one source)."""
    if not df.isStreaming:
        raise ConfigError("start_aggregation takes a streaming DataFrame (spark.readStream...), not a batch one")
    sources = []
    leaves = df._jdf.queryExecution().analyzed().collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.isStreaming():
            sources.append(leaf)
    if len(sources) != 1:
        raise ConfigError(
            f"the query reads {len(sources)} streaming sources; start_aggregation takes exactly one, Spark's Kafka "
            "source (join it with static tables, not with other streams)"
        )
    (source,) = sources
    name = source.sourceName() if source.getClass().getSimpleName() == "StreamingRelationV2" else None
    if name != "kafka":
        raise ConfigError(f"the query's streaming source is {name or 'not Kafka'}; start_aggregation reads Kafka")
    options = source.extraOptions()
    topic = options.get("subscribe")
    if topic is None or "," in topic or options.get("subscribePattern") or options.get("assign"):
        raise ConfigError(
            "the query's Kafka source must subscribe to one topic (.option('subscribe', TOPIC)): a store records "
            "its position in one topic"
        )
    return topic.strip()


def _column(df, given: str | Column, what: str) -> tuple[Column, str]:
    """`given` (a column name or a Column) and its text, once Spark can resolve it over `df`."""
    column = F.col(given) if isinstance(given, str) else given
    text = given if isinstance(given, str) else column._jc.toString()
    try:
        df.select(column).schema  # noqa: B018 - resolving the column is the check
    except Exception as exc:  # noqa: BLE001 - Spark's AnalysisException and its kin: say which column
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{what}: Spark cannot resolve {text!r} over the query's columns: {first}") from None
    return column, text


def _type_of(df, column: Column) -> T.DataType:
    return df.select(column).schema.fields[0].dataType


def _key_text(column: Column, data_type: T.DataType) -> Column:
    """The key as text: a string as it is; a number or boolean as JSON (42, 2.5, true, as a JSON
    record's key field reads); a struct, array or map as JSON; anything else cast to a string."""
    if isinstance(data_type, T.StringType):
        return column
    if isinstance(data_type, T.NumericType | T.BooleanType):
        return F.to_json(column.cast("variant"))
    if isinstance(data_type, T.StructType | T.ArrayType | T.MapType):
        return F.to_json(column)
    return column.cast("string")


def _time_ms(column: Column, data_type: T.DataType, text: str) -> Column:
    if isinstance(data_type, T.TimestampType):
        return F.unix_millis(column)
    if isinstance(data_type, T.TimestampNTZType):
        return F.unix_millis(column.cast("timestamp"))
    if isinstance(data_type, _INTEGRAL):
        return column.cast("bigint")
    raise ConfigError(
        f"time {text!r} is {data_type.simpleString()}: give a timestamp or an integer of epoch milliseconds. Nothing "
        "was written."
    )


def _typed(column: Column, data_type: T.DataType, takes: str, field: str, users: list[str]) -> Column:
    """The field as its measures take it, or ConfigError naming the measures and both types."""
    if takes == INTEGER and isinstance(data_type, _INTEGRAL):
        return column.cast("bigint")
    if takes == INTEGER and isinstance(data_type, T.DecimalType) and data_type.scale == 0:
        return column.try_cast("bigint")  # null beyond a long: an overflow dead letter
    if takes == NUMBER and isinstance(data_type, T.NumericType):
        return column.cast("double")
    if takes == ANY_VALUE:
        if isinstance(data_type, T.StructType | T.ArrayType | T.MapType):
            return F.to_json(column)
        return F.to_json(column.cast("variant"))
    raise ConfigError(
        f"measure {', '.join(users)}: field {field} is {data_type.simpleString()}, but it takes {_TAKES[takes]}. "
        "Cast the column or choose another aggregation. Nothing was written."
    )


def stage(
    df,
    aggregate: AggregateSpec,
    key: str | Column,
    time: str | Column | None = None,
    values: Mapping[str, str | Column] | None = None,
):
    """The user's frame reduced to what the store needs: the Kafka columns (topic, partition,
    offset), the key as text, the event time in epoch ms, each (field, type) a measure reads
    typed as it takes it (and whether it was given), the Kafka time and the raw record for dead
    letters. Returns (the staged frame, its ColumnRecords). ConfigError, before anything starts,
    for a missing Kafka column, a column Spark cannot resolve or one of the wrong type."""
    missing = [c for c in KAFKA_COLUMNS if c not in df.columns]
    if time is None and "timestamp" not in df.columns:
        missing.append("timestamp")
    if missing:
        raise ConfigError(
            f"the query's frame lacks the Kafka source's {', '.join(missing)}: keep topic, partition and offset "
            "(and timestamp, unless time= names the event time) through your transforms; they place each row "
            "in its batch and its dead letters"
        )
    values = dict(values or {})
    unknown = sorted(set(values) - set(aggregate.fields))
    if unknown:
        raise ConfigError(f"values= names {', '.join(unknown)}, which no measure reads ({aggregate.text})")
    key_column, key_text = _column(df, key, "key")
    selected = [F.col(c) for c in KAFKA_COLUMNS]
    selected.append(_key_text(key_column, _type_of(df, key_column)).alias(_KEY))
    time_text = None
    if time is None:
        selected.append(F.unix_millis(F.col("timestamp")).alias(_TIME))
    else:
        time_column, time_text = _column(df, time, "time")
        selected.append(_time_ms(time_column, _type_of(df, time_column), time_text).alias(_TIME))
    fields = {}
    for (field, takes), name in value_columns(aggregate).items():
        if field not in fields:
            fields[field] = _column(df, values.get(field, field), f"field {field}")[0]
        column = fields[field]
        users = [m.text for m in aggregate.measures if m.field == field and m.aggregation.takes == takes]
        selected += [
            _typed(column, _type_of(df, column), takes, field, users).alias(_value(name)),
            column.isNotNull().alias(_given(name)),
        ]
    selected.append(
        (F.unix_millis(F.col("timestamp")) if "timestamp" in df.columns else F.lit(None).cast("bigint")).alias(_TS)
    )
    selected.append(_raw(df, key_column, fields).alias(_RAW))
    staged = df.select(*selected)
    return staged, ColumnRecords(aggregate, key_text, time_text)


def _raw(df, key: Column, fields: dict[str, Column]) -> Column:
    """A dead letter's record: the Kafka value when the frame kept it, else the row's key and
    fields as a JSON object."""
    if "value" in df.columns:
        data_type = _type_of(df, F.col("value"))
        if isinstance(data_type, T.BinaryType):
            return F.col("value")
        if isinstance(data_type, T.StringType):
            return F.col("value").cast("binary")
    parts = [key.alias("key"), *(column.alias(field) for field, column in fields.items())]
    return F.to_json(F.struct(*parts), {"ignoreNullFields": "false"}).cast("binary")


def _spec(measures: str | AggregateSpec) -> AggregateSpec:
    if isinstance(measures, AggregateSpec):
        return measures
    try:
        return AggregateSpec.parse(measures)
    except ValueError as exc:
        raise ConfigError(f"measures: {exc}") from None


class AggregationQuery:
    """A started start_aggregation query and the store's lease it holds. `stop()` stops the
    query, releases the lease and records the stream's end; `await_termination()` waits for
    the query (an available-now trigger: until it has read what was there), then does the same.
    A bare StreamingQuery's stop() would leave the lease held until it lapses and the stream
    log saying it runs: hence this object, with the query as `query`."""

    def __init__(self, running: RunningStream) -> None:
        self._running = running
        self.query = running.query

    @property
    def is_active(self) -> bool:
        return self.query.isActive

    def process_all_available(self) -> None:
        self.query.processAllAvailable()

    def stop(self, failure: str | None = None) -> None:
        self._running.stop(failure)

    def await_termination(self) -> None:
        """Wait until the query ends (raises its error, recorded as the stream's failure), then stop."""
        failure = None
        try:
            self.query.awaitTermination()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            failure = _store_error_message(exc) or str(exc) or type(exc).__name__
            raise
        finally:
            self.stop(failure)

    def __enter__(self) -> AggregationQuery:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        """Stop; an error that ended the `with` block is recorded as the stream's failure."""
        self.stop(None if exc is None else _store_error_message(exc) or str(exc) or exc_type.__name__)


def start_aggregation(
    df,
    *,
    store: str,
    measures: str | AggregateSpec,
    key: str | Column,
    checkpoint: str,
    time: str | Column | None = None,
    values: Mapping[str, str | Column] | None = None,
    cassandra: CassandraConfig | None = None,
    kafka: KafkaConfig | None = None,
    trigger: str = "available-now",
    store_type: str | None = None,
    partitions: int | None = None,
    driver_apply_records: int = 1000,
    max_future_ms: int | None = None,
    lease_ttl_s: float = 30.0,
    dead_letter_retention_ms: int | None = None,
    window_ms: int | None = None,
    hop_ms: int | None = None,
    grace_ms: int | None = None,
    retention_ms: int | None = None,
    session_gap_ms: int | None = None,
    seams: BatchSeams = SHIPPED,
) -> AggregationQuery:
    """Start keeping `measures` per `key` of the streaming DataFrame `df` in the aggregate store
    `store`, exactly once (see the module doc). Returns the running AggregationQuery.

    df: a streaming DataFrame of Spark's Kafka source subscribed to one topic, after any
      stateless transforms of yours; it keeps the source's topic, partition, offset (and
      timestamp when `time` is None).
    measures: e.g. "n=count(), total=sum_int(amount), hi=max(amount)"; a measure's field is a
      column of `df`, or a name `values` maps to a column (values={"amount": F.col("price") * 2}).
    key: a column (name or Column); strings are kept as they are, numbers and booleans as JSON.
    time: the event time, a timestamp or epoch-milliseconds column (None: the Kafka timestamp).
    cassandra, kafka: where the store and the topic are (None: the STATESTORE_* environment, as
      the job reads it; kafka's bootstrap servers default to the source's).
    trigger: 'available-now' or an interval such as '10s'. store_type: partitioned-kv (default
      for a new store), global-kv, partitioned-window (the default with window_ms) or
      partitioned-session (the default with session_gap_ms).
    window_ms, hop_ms, grace_ms, retention_ms: keep the measures per key and event-time window
      (`time`'s), as the job's --window, --hop, --grace and --retention.
    session_gap_ms: keep the measures per key and session of events at most this far apart (with
      grace_ms and retention_ms), as the job's --session-gap. The rest as the job's flags of the
      same names.

    ConfigError before anything is written: a frame that is not one Kafka source, lacks the
    Kafka columns, or has a column of a type its measure cannot take; the store errors the job
    raises (another writer holds the lease, a checkpoint of another history, a store keeping
    other measures) as the job raises them."""
    aggregate = _spec(measures)
    topic = kafka_topic(df)
    if _source_option(df, "startingOffsets") is None:
        _log.warning(
            "the Kafka source of store %s's query sets no startingOffsets: a new checkpoint starts at Spark's "
            "default, latest, and skips what topic %s holds now (.option('startingOffsets', 'earliest') reads it)",
            store,
            topic,
        )
    staged, records = stage(df, aggregate, key, time, values)
    if cassandra is None:
        cassandra = cfg.resolve(CassandraConfig)
    if kafka is None:
        servers = _source_option(df, "kafka.bootstrap.servers")
        kafka = cfg.resolve(KafkaConfig, overrides={"bootstrap_servers": servers})
    settings = {
        "max_future_ms": max_future_ms,
        "dead_letter_retention_ms": dead_letter_retention_ms,
        "store_type": store_type,
        "partitions": partitions,
        "window": window_ms,
        "hop": hop_ms,
        "grace": grace_ms,
        "retention": retention_ms,
        "session_gap": session_gap_ms,
    }
    stream = StreamConfig(
        topic=topic,
        store=store,
        checkpoint=checkpoint,
        trigger=cfg.parse_trigger(trigger),
        driver_apply_records=driver_apply_records,
        lease_ttl_s=lease_ttl_s,
        input_format="json",
        aggregate=aggregate.text,
        # The stream's settings want a key; the registry records own_input's (below).
        key_expr=records.key_text,
        **{name: value for name, value in settings.items() if value is not None},
    )
    # Recorded with the store: a run keying or timing it otherwise (this query changed, or the job
    # reading the topic as JSON) is refused before anything is written. Not `json`: recovery and
    # validation, which read a store's topic again, cannot run the user's transforms.
    own = registry.InputSettings(OWN_QUERY_FORMAT, (), records.key_text, records.time_text)
    job = JobConfig(stream, cassandra, kafka, own_input=own)
    running = start_query(df.sparkSession, job, lambda _starting: staged, records, seams, name=f"aggregate-{store}")
    return AggregationQuery(running)


def _source_option(df, name: str) -> str | None:
    """An option of the frame's streaming source (kafka_topic checked there is one)."""
    leaves = df._jdf.queryExecution().analyzed().collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.isStreaming():
            return leaf.extraOptions().get(name)
    return None
