"""The input stage for JSON records: a batch's Kafka rows as what an aggregate store counts.

Each record becomes one row of (key, time_ms, partition, offset, one typed column per field a
measure reads) and, when it cannot be counted, a `reason` and its `detail`: a dead letter,
counted nowhere (no measure: the whole record or nothing, never a silent zero). Pure DataFrame
plans: nothing runs until an action.

A record is parsed once with Spark's VARIANT (`try_parse_json`: null when it is not JSON). A
field is read by its path (`device.id`) and judged by its type (`schema_of_variant`): integers
(BIGINT, INT, SMALLINT, TINYINT, or a DECIMAL(p,0) that fits a long), numbers (those, DECIMAL,
DOUBLE, FLOAT), any value (kept as its JSON text). A JSON null is a missing field. The reasons,
the first that applies: null_value, invalid_utf8, invalid_json (not JSON, or not an object),
missing_key, key_too_long, missing_field, wrong_type, overflow (an integer beyond a long, a
number beyond a double), future (a time further ahead of the batch's clock than --max-future).
Every check is a `try_` function or a type test: no record can fail the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pyspark.sql import functions as F

from statestore.core.aggregation import AggregateSpec
from statestore.core.aggregation.kinds import ANY_VALUE, INTEGER, NUMBER
from statestore.core.model import MAX_KEY_BYTES
from statestore.store.book import deadletters
from statestore.stream.transforms import FUTURE_LIMIT, after_future_limit

# How strict a field's type check is: a field read by several measures is checked by the
# strictest (an integer is a number, a number is a value).
_STRICTNESS = {ANY_VALUE: 0, NUMBER: 1, INTEGER: 2}
_LONG_LIMIT = 9.223372036854775807e18  # a double this large is no long
RECORD = "record"  # the parsed record (a VARIANT), as --key-expr names it
# The columns of the parsed rows besides the typed values (v0, v1, ...).
KEY, TIME_MS, REASON, DETAIL = "key", "time_ms", "reason", "detail"


@dataclass(frozen=True)
class JsonInput:
    """What the job's settings say of JSON records: the store's measures, the key (one or more
    fields, or a Spark SQL expression over the parsed `record`), and the event time (a field of
    epoch milliseconds or an ISO-8601 string; None: the Kafka record timestamp)."""

    aggregate: AggregateSpec
    key_fields: tuple[str, ...] = ()
    key_expr: str | None = None
    time_field: str | None = None

    def __post_init__(self) -> None:
        if bool(self.key_fields) == bool(self.key_expr):
            raise ValueError("JSON records need a key: fields (--key) or an expression (--key-expr), one of them")


def value_columns(aggregate: AggregateSpec) -> dict[tuple[str, str], str]:
    """Pure: the typed column of each (field, type) the measures read, as the parsed rows name
    it (v0, v1, ...: a field's path is no column name)."""
    pairs = dict.fromkeys((m.field, m.aggregation.takes) for m in aggregate.measures if m.field)
    return {pair: f"v{i}" for i, pair in enumerate(pairs)}


def measure_columns(aggregate: AggregateSpec) -> dict[str, str | None]:
    """Pure: each measure's column in the parsed rows (None: it reads no field, as count())."""
    columns = value_columns(aggregate)
    return {m.name: columns.get((m.field, m.aggregation.takes)) for m in aggregate.measures}


def field_checks(aggregate: AggregateSpec) -> dict[str, str]:
    """Pure: each field the measures read, in order, with the strictest type any of them takes."""
    checks: dict[str, str] = {}
    for measure in aggregate.measures:
        if measure.field:
            takes, held = measure.aggregation.takes, checks.get(measure.field)
            if held is None or _STRICTNESS[takes] > _STRICTNESS[held]:
                checks[measure.field] = takes
    return checks


def parsed_records(batch_df, spec: JsonInput):
    """The batch's Kafka records as (key, time_ms, partition, offset, v0, v1, ..., reason,
    detail, topic, ts_ms, raw): the typed values are null on a record with a reason. `batch_df`
    may carry its batch's future limit (transforms.with_future_limit)."""
    parsed = batch_df
    for columns in _stages(spec, FUTURE_LIMIT in batch_df.columns):
        parsed = parsed.select(*columns)
    return parsed


@lru_cache(maxsize=64)
def _stages(spec: JsonInput, future: bool) -> tuple[tuple, ...]:
    """The columns of parsed_records' successive selects, built once per spec (and whether the
    batch carries a future limit), not once per batch: each of their hundreds of expressions is
    a call into Spark's JVM, which cost the driver's JVM a third of a second per batch. They
    name columns only (the batch's limit is its FUTURE_LIMIT column) and hold no session, so
    every batch takes them.

    Each field is read once (its VARIANT and its type, `schema_of_variant`, each a column of its
    own), and the checks run only on a record that `_countable` cannot clear at a glance (every
    field of the type its check wants, the key and time in bounds): a good record pays for its
    fields' reads and types, not for every check in turn."""
    value = F.col("value")
    readable = value.isNotNull() & F.is_valid_utf8(value)
    record = F.when(readable, F.call_function("try_parse_json", value.cast("string"))).alias(RECORD)
    fields = list(
        dict.fromkeys(
            [*spec.key_fields, *([spec.time_field] if spec.time_field else []), *field_checks(spec.aggregate)]
        )
    )
    got = {field: _Field(f"_f{i}", f"_k{i}") for i, field in enumerate(fields)}
    reads = tuple(_field(field).alias(got[field].name) for field in fields)
    kinds = tuple(
        F.call_function("schema_of_variant", got[field].value).alias(got[field].kind_name) for field in fields
    )
    # One CASE of many branches, the first that holds wins (a null condition does not hold).
    verdict = F.when(_countable(spec, got, future), F.lit(None).cast("struct<reason: string, detail: string>"))
    for condition, why, text in _checks(spec, got, future):
        verdict = verdict.when(condition, F.struct(F.lit(why).alias(REASON), text.alias(DETAIL)))
    good = F.col(REASON).isNull()
    values = tuple(
        F.when(good, _typed(got[field].value, takes)).alias(name)
        for (field, takes), name in value_columns(spec.aggregate).items()
    )
    star = F.col("*")
    return (
        (star, record),
        (star, *reads),
        (star, *kinds),
        (star, _key(spec, got).alias("_key"), _time_ms(spec, got).alias("_time")),
        (star, verdict.alias("_verdict")),
        (star, F.col("_verdict")[REASON].alias(REASON), F.col("_verdict")[DETAIL].alias(DETAIL)),
        (
            F.col("_key").alias(KEY),
            F.col("_time").alias(TIME_MS),
            F.col("partition"),
            F.col("offset"),
            *values,
            F.col(REASON),
            F.col(DETAIL),
            F.col("topic"),
            F.unix_millis("timestamp").alias("ts_ms"),
            value.alias("raw"),
        ),
    )


def dead_letter_rows(parsed):
    """The parsed records that cannot be counted, as dead letters: (topic, partition, offset,
    ts_ms, reason, detail, raw), what statestore.stream.dead_letters writes."""
    return parsed.filter(F.col(REASON).isNotNull()).select(
        "topic", "partition", "offset", "ts_ms", REASON, DETAIL, "raw"
    )


@dataclass(frozen=True)
class _Field:
    """A field's two columns in the staged rows: its value (a VARIANT, null when the record has
    no such path) and its type (`schema_of_variant` of it: BIGINT, DECIMAL(2,1), STRING,
    OBJECT<...>, VOID for a JSON null; null when the value is)."""

    name: str
    kind_name: str

    @property
    def value(self):
        return F.col(self.name)

    @property
    def kind(self):
        return F.col(self.kind_name)


_INTEGERS = ("BIGINT", "INT", "SMALLINT", "TINYINT")
_FLOATS = ("DOUBLE", "FLOAT")


def _field(field: str):
    # Fields are letters, digits, _ and dots (statestore.core.aggregation.spec checks them).
    return F.call_function("try_variant_get", F.col(RECORD), F.lit("$." + field), F.lit("variant"))


def _missing(v):
    return v.isNull() | F.coalesce(F.call_function("is_variant_null", v), F.lit(False))


def _as(v, sql_type: str):
    return F.call_function("try_variant_get", v, F.lit("$"), F.lit(sql_type))


def _json(v):
    return F.call_function("to_json", v)


def _kind(schema):
    """A value's JSON type as a detail shows it, from its schema_of_variant: BIGINT,
    DECIMAL(2,1), STRING, OBJECT, ARRAY..."""
    return F.substring_index(schema, "<", 1)


def _number(kind):
    """The types of a JSON number (schema_of_variant's)."""
    return kind.isin(*_INTEGERS, *_FLOATS) | kind.startswith("DECIMAL(")


def _key(spec: JsonInput, got: dict[str, _Field]):
    """The key's text: one field's value (a string unquoted, any other value as JSON), several
    fields' values as a JSON array, or --key-expr's value as a string."""
    if spec.key_expr:
        return F.expr(spec.key_expr).cast("string")
    if len(spec.key_fields) == 1:
        field = got[spec.key_fields[0]]
        v = field.value
        return (
            F.when(_missing(v), F.lit(None)).when(field.kind == F.lit("STRING"), _as(v, "string")).otherwise(_json(v))
        )
    parts = [got[field].value for field in spec.key_fields]
    absent = F.lit(False)
    for part in parts:
        absent = absent | _missing(part)
    return F.when(~absent, _json(F.array(*parts)))


def _time_ms(spec: JsonInput, got: dict[str, _Field]):
    """The record's event time (epoch ms): its time field's (a number of milliseconds, or an
    ISO-8601 string; without an offset, in the Spark session's time zone), or its Kafka time."""
    if not spec.time_field:
        return F.unix_millis("timestamp")
    field = got[spec.time_field]
    parsed = F.unix_millis(F.call_function("try_to_timestamp", _as(field.value, "string")))
    return F.when(field.kind == F.lit("STRING"), parsed).otherwise(_as(field.value, "bigint"))


def _typed(v, takes: str):
    if takes == INTEGER:
        return _as(v, "bigint")
    if takes == NUMBER:
        return _as(v, "double")
    return _json(v)


def _countable(spec: JsonInput, got: dict[str, _Field], future: bool):
    """True (never null) only for a record none of _checks' conditions holds for, told from its
    fields' types and its key and time alone; False for every other record (the checks then
    judge it). A record with a field at its path is an object (no other JSON value has fields),
    so the object's own type is asked only when no field is read."""
    key, time_ms = F.col("_key"), F.col("_time")
    ok = F.col(RECORD).isNotNull() & key.isNotNull() & F.octet_length(key).between(1, MAX_KEY_BYTES)
    if not got:
        ok = ok & F.call_function("schema_of_variant", F.col(RECORD)).startswith("OBJECT")
    if spec.time_field:  # a number of milliseconds that fits a long, or a time in a string
        ok = ok & time_ms.isNotNull() & (_number(got[spec.time_field].kind) | (got[spec.time_field].kind == "STRING"))
    for field, takes in field_checks(spec.aggregate).items():
        v, kind = got[field].value, got[field].kind
        if takes == INTEGER:
            ok = ok & kind.isin(*_INTEGERS)
        elif takes == NUMBER:  # no integer or DECIMAL (38 digits at most) is beyond a double
            finite = ~_as(v, "double").isin(float("inf"), float("-inf"))
            ok = ok & (kind.isin(*_INTEGERS) | kind.startswith("DECIMAL(") | (kind.isin(*_FLOATS) & finite))
        else:
            ok = ok & ~_missing(v)
    if future:
        ok = ok & ~after_future_limit(time_ms)
    return F.coalesce(ok, F.lit(False))


def _checks(spec: JsonInput, got: dict[str, _Field], future: bool) -> list[tuple]:
    """(condition, reason, detail) of every check, in order: the first that holds is the
    record's reason."""
    value, record = F.col("value"), F.col(RECORD)
    schema = F.call_function("schema_of_variant", record)
    checks: list[tuple] = [
        (value.isNull(), deadletters.NULL_VALUE, F.lit("the message has no value")),
        (
            ~F.is_valid_utf8(value),
            deadletters.INVALID_UTF8,
            F.lit("the value is not valid UTF-8 text; nothing of it was counted"),
        ),
        (record.isNull(), deadletters.INVALID_JSON, F.lit("the value is not JSON; nothing of it was counted")),
        (
            ~schema.startswith("OBJECT"),
            deadletters.INVALID_JSON,
            F.format_string("the value is JSON but no object (a %s); nothing of it was counted", _kind(schema)),
        ),
    ]
    key = F.col("_key")
    what = f"the key expression {spec.key_expr}" if spec.key_expr else "the key field(s) " + ", ".join(spec.key_fields)
    checks += [
        (key.isNull(), deadletters.MISSING_KEY, F.lit(f"{what}: missing or null; nothing of the record was counted")),
        (
            F.length(key) == 0,
            deadletters.MISSING_KEY,
            F.lit(f"{what}: an empty key; nothing of the record was counted"),
        ),
        (
            F.octet_length(key) > MAX_KEY_BYTES,
            deadletters.KEY_TOO_LONG,
            F.format_string(
                f"the key is %d bytes, over the {MAX_KEY_BYTES}-byte key limit; nothing of the record was counted",
                F.octet_length(key),
            ),
        ),
    ]
    if spec.time_field:
        checks += _time_checks(got[spec.time_field], spec.time_field)
    for field, takes in field_checks(spec.aggregate).items():
        checks.append(
            (
                _missing(got[field].value),
                deadletters.MISSING_FIELD,
                F.lit(f"field {field} is missing or null; nothing of the record was counted"),
            )
        )
        checks += _value_checks(got[field], field, takes)
    if future:
        checks.append(
            (
                after_future_limit(F.col("_time")),
                deadletters.FUTURE,
                F.format_string(
                    "its time is after %s ms, its batch's clock plus the tolerance (--max-future): nothing of it was "
                    "counted and it moved no stream time",
                    F.col(FUTURE_LIMIT).cast("string"),
                ),
            )
        )
    return checks


def _time_checks(got: _Field, field: str) -> list[tuple]:
    v, kind = got.value, got.kind
    number = _number(kind)
    text = kind == F.lit("STRING")
    return [
        (
            _missing(v),
            deadletters.MISSING_FIELD,
            F.lit(f"time field {field} is missing or null; nothing of the record was counted"),
        ),
        (
            text & F.call_function("try_to_timestamp", _as(v, "string")).isNull(),
            deadletters.WRONG_TYPE,
            F.format_string(f"time field {field}: %s is no ISO-8601 time", _json(v)),
        ),
        (
            number & _as(v, "bigint").isNull(),
            deadletters.OVERFLOW,
            F.format_string(f"time field {field}: %s milliseconds do not fit a 64-bit long", _json(v)),
        ),
        (
            ~(number | text),
            deadletters.WRONG_TYPE,
            F.format_string(
                f"time field {field}: expected epoch milliseconds or an ISO-8601 string, found %s", _kind(kind)
            ),
        ),
    ]


def _value_checks(got: _Field, field: str, takes: str) -> list[tuple]:
    """(condition, reason, detail) of a present field that a measure reads as `takes`."""
    if takes == ANY_VALUE:
        return []
    v, kind = got.value, got.kind
    integer = kind.isin(*_INTEGERS)
    decimal = kind.startswith("DECIMAL(")
    whole = decimal & kind.endswith(",0)")
    floating = kind.isin(*_FLOATS)
    as_double = _as(v, "double")
    infinite = as_double.isin(float("inf"), float("-inf"))
    if takes == NUMBER:
        return [
            (
                ~(integer | decimal | floating),
                deadletters.WRONG_TYPE,
                F.format_string(f"field {field}: expected a number, found %s", _kind(kind)),
            ),
            (infinite, deadletters.OVERFLOW, F.format_string(f"field {field}: %s is beyond a double", _json(v))),
        ]
    too_large = (whole & _as(v, "bigint").isNull()) | (floating & (infinite | (F.abs(as_double) >= _LONG_LIMIT)))
    return [
        (
            too_large,
            deadletters.OVERFLOW,
            F.format_string(f"field {field}: %s does not fit a 64-bit long", _json(v)),
        ),
        (
            ~(integer | whole),
            deadletters.WRONG_TYPE,
            F.format_string(f"field {field}: expected an integer, found %s %s", _kind(kind), _json(v)),
        ),
    ]
