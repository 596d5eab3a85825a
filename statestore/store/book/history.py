"""The record of maintenance runs per store: table `statestore_maintenance` of the keyspace.

One row per run and job, newest first. Expiry records its cutoff before it deletes anything,
so validation knows which counts may legitimately be lower than the input says (an entry
removed by expiry restarts from zero when its word comes again). The Airflow store page reads
the latest audit from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from statestore.conn.cassandra import DDL_PROFILE, prepare
from statestore.core.codecs import millis_of
from statestore.core.names import validate_keyspace, validate_store_name

TABLE = "statestore_maintenance"
EXPIRE, COMPACT, AUDIT, VALIDATE = "expire", "compact", "audit", "validate"
# Expiry runs that may have deleted entries (a dry run deletes nothing).
_DELETING = ("running", "done", "failed")


@dataclass(frozen=True)
class Run:
    store: str
    job: str
    run_at: datetime
    status: str
    cutoff: datetime | None
    summary: dict


def ensure_table(session, keyspace: str) -> None:
    session.execute(
        f"CREATE TABLE IF NOT EXISTS {validate_keyspace(keyspace)}.{TABLE} ("
        " store text, job text, run_at timestamp, status text, cutoff timestamp, summary text,"
        " PRIMARY KEY ((store), job, run_at)) WITH CLUSTERING ORDER BY (job ASC, run_at DESC)"
        " AND comment = 'statestore: maintenance runs per store (expire, compact, audit, validate)'",
        execution_profile=DDL_PROFILE,
    )


def now() -> datetime:
    """This moment to the millisecond (what a timestamp column keeps), as a naive UTC datetime."""
    moment = datetime.now(UTC).replace(tzinfo=None)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def record(
    session,
    keyspace: str,
    store: str,
    job: str,
    run_at: datetime,
    status: str,
    cutoff_ms: int | None = None,
    summary: dict | None = None,
) -> None:
    """Insert or update the run of `job` that started at `run_at`."""
    upsert = prepare(
        session,
        f"INSERT INTO {validate_keyspace(keyspace)}.{TABLE} (store, job, run_at, status, cutoff, summary)"
        " VALUES (?, ?, ?, ?, ?, ?)",
    )
    upsert.is_idempotent = True
    session.execute(
        upsert,
        (validate_store_name(store), job, run_at, status, cutoff_ms, json.dumps(summary or {}, default=str)),
        execution_profile=DDL_PROFILE,
    )


def runs(session, keyspace: str, store: str, job: str, limit: int = 100) -> list[Run]:
    """The latest runs of `job` on `store`, newest first."""
    select = prepare(
        session,
        f"SELECT store, job, run_at, status, cutoff, summary FROM {validate_keyspace(keyspace)}.{TABLE}"
        " WHERE store = ? AND job = ? LIMIT ?",
    )
    return [
        Run(r.store, r.job, r.run_at, r.status, r.cutoff, json.loads(r.summary or "{}"))
        for r in session.execute(select, (validate_store_name(store), job, limit))
    ]


def expired_before(session, keyspace: str, store: str) -> int | None:
    """The latest cutoff (ms) any expiry run applied to `store`, or None if none ever did.
    Entries whose every input event is at or after it cannot have been touched by expiry."""
    select = prepare(
        session, f"SELECT status, cutoff FROM {validate_keyspace(keyspace)}.{TABLE} WHERE store = ? AND job = ?"
    )
    cutoffs = [
        millis_of(r.cutoff)
        for r in session.execute(select, (validate_store_name(store), EXPIRE))
        if r.status in _DELETING and r.cutoff is not None
    ]
    return max(cutoffs, default=None)
