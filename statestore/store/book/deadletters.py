"""Dead letters: input a store's stream could not count, kept with its Kafka coordinates.

One table per store, `<store>_deadletters`, keyed by where the message came from, so a
replayed batch rewrites the same rows instead of adding duplicates. A stream keeps them for
its --dead-letter-retention (the table's default TTL; 30 days unless set), so bad input from a
broken producer cannot grow the table without bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cassandra.concurrent import execute_concurrent

from statestore.conn.cassandra import DDL_PROFILE, add_missing_columns, prepare, table_ttl_s
from statestore.core.codecs import millis_of
from statestore.core.names import deadletter_table, validate_keyspace

# Reasons, stable strings: they are part of the table's content.
INVALID_UTF8 = "invalid_utf8"
NULL_VALUE = "null_value"
KEY_TOO_LONG = "key_too_long"
LATE = "late"  # window stores: every window of the record had closed (or some had; see detail)
# Any store: the record's time is further ahead of its batch's clock than --max-future (a producer
# whose clock is wrong); counted nowhere, it moves no stream time.
FUTURE = "future"
# JSON records (an aggregate store's input, statestore.stream.json_input); the whole record is
# counted nowhere. Not JSON, or JSON but no object:
INVALID_JSON = "invalid_json"
MISSING_KEY = "missing_key"  # a key field missing or null, or the key expression null or empty
MISSING_FIELD = "missing_field"  # a field a measure (or the time) reads is missing or null; detail names it
WRONG_TYPE = "wrong_type"  # a field of another type than its measure takes; detail: field, expected, found
OVERFLOW = "overflow"  # an integer beyond a 64-bit long (sum_int, the time), or a number beyond a double

# Added after the first release: tables created before it gain the column on ensure_table.
_LATER_COLUMNS = (("stream_time", "timestamp"),)


@dataclass(frozen=True)
class DeadLetter:
    topic: str
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp_ms: int | None
    reason: str
    detail: str
    raw: bytes | None
    batch_id: int | None = None
    # Window and session stores: the stream time the record's batch started with, which
    # decided what was late (validation recounts by it).
    stream_time_ms: int | None = None


def create_cql(keyspace: str, store: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {validate_keyspace(keyspace)}.{deadletter_table(store)} ("
        " topic text, kafka_partition int, kafka_offset bigint, reason text,"
        " kafka_timestamp timestamp, detail text, raw blob, batch_id bigint, recorded_at timestamp,"
        " stream_time timestamp,"
        " PRIMARY KEY ((topic, kafka_partition), kafka_offset, reason))"
        f" WITH comment = 'statestore: input store {store} could not count'"
    )


def ensure_table(
    session, keyspace: str, store: str, ddl_profile: object = DDL_PROFILE, retention_s: int | None = None
) -> tuple[str, ...]:
    """Create the table, or add the columns a table created by an older release lacks (returned,
    as table.column). `retention_s`: how long a dead letter is kept, the table's default TTL (0:
    forever; None: as the table has it), changed when the table has another."""
    session.execute(create_cql(keyspace, store), execution_profile=ddl_profile)
    added = add_missing_columns(session, keyspace, deadletter_table(store), _LATER_COLUMNS, ddl_profile)
    if retention_s is not None and table_ttl_s(session, keyspace, deadletter_table(store)) != retention_s:
        session.execute(
            f"ALTER TABLE {validate_keyspace(keyspace)}.{deadletter_table(store)}"
            f" WITH default_time_to_live = {int(retention_s)}",
            execution_profile=ddl_profile,
        )
    return added


def write(
    session, keyspace: str, store: str, letters: list[DeadLetter], concurrency: int = 16, write_ts: int | None = None
) -> None:
    """Write `letters`; `write_ts`: the write timestamp of their batch (epoch micros; None: the
    server's clock, for tools), so a reset's deletes at its floor timestamp shadow the dead letters
    of a writer paused mid-batch as they shadow its entries (statestore.store.admin.truncate_store)."""
    stamped = "" if write_ts is None else " USING TIMESTAMP ?"
    insert = prepare(
        session,
        f"INSERT INTO {validate_keyspace(keyspace)}.{deadletter_table(store)} (topic, kafka_partition,"
        " kafka_offset, reason, kafka_timestamp, detail, raw, batch_id, stream_time, recorded_at)"
        f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, toTimestamp(now())){stamped}",
    )
    stamp = () if write_ts is None else (write_ts,)
    insert.is_idempotent = True
    work = (
        (
            insert,
            (
                d.topic,
                d.kafka_partition,
                d.kafka_offset,
                d.reason,
                d.kafka_timestamp_ms,
                d.detail,
                d.raw,
                d.batch_id,
                d.stream_time_ms,
                *stamp,
            ),
        )
        for d in letters
    )
    execute_concurrent(session, work, concurrency=concurrency, raise_on_first_error=True)


def delete_partitions_before(session, keyspace: str, store: str, partitions, floor_ts: int) -> None:
    """Delete the dead letters of each (topic, Kafka partition) in `partitions` USING TIMESTAMP
    `floor_ts`: every dead letter a batch wrote at or below that timestamp is shadowed, even one
    written after this delete (a writer paused mid-batch), and later batches' are not."""
    delete = prepare(
        session,
        f"DELETE FROM {validate_keyspace(keyspace)}.{deadletter_table(store)} USING TIMESTAMP ?"
        " WHERE topic = ? AND kafka_partition = ?",
    )
    for topic, partition in partitions:
        session.execute(delete, (floor_ts, topic, partition))


def read_all(session, keyspace: str, store: str, page_size: int = 500) -> Iterator[DeadLetter]:
    select = prepare(
        session,
        "SELECT topic, kafka_partition, kafka_offset, reason, kafka_timestamp, detail, raw, batch_id, stream_time"
        f" FROM {validate_keyspace(keyspace)}.{deadletter_table(store)}",
    )
    select.fetch_size = page_size
    for row in session.execute(select):
        yield DeadLetter(
            row.topic,
            row.kafka_partition,
            row.kafka_offset,
            None if row.kafka_timestamp is None else millis_of(row.kafka_timestamp),
            row.reason,
            row.detail,
            row.raw,
            row.batch_id,
            None if row.stream_time is None else millis_of(row.stream_time),
        )
