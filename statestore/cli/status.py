"""`statestore status STORE`: how the store's stream is doing (statestore.store.status), with
the last audit and validation verdicts of the maintenance history."""

from __future__ import annotations

import json
import sys
from datetime import UTC

from statestore.conn.cassandra import session_for, table_metadata
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.event_time import format_instant
from statestore.core.names import validate_store_name
from statestore.maintenance import history
from statestore.store.status import StreamStatus, stream_status


def add_command(command) -> None:
    p = command("status", cmd_status, "how a store's stream is doing: state, writer, lag, rate", kafka=True)
    p.add_argument("store")
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")
    p.add_argument("--no-lag", action="store_true", help="do not ask Kafka for its end offsets (no lag)")


def verdicts(session, keyspace: str, store: str) -> dict[str, dict | None]:
    """The last audit's and validation's outcome, from the maintenance history (None: never run)."""
    known = table_metadata(session, keyspace, history.TABLE) is not None
    out: dict[str, dict | None] = {}
    for name, job in (("last_audit", history.AUDIT), ("last_validation", history.VALIDATE)):
        runs = history.runs(session, keyspace, store, job, 1) if known else []
        out[name] = {"status": runs[0].status, "at": _iso_of(runs[0].run_at)} if runs else None
    return out


def cmd_status(args) -> int:
    config = cfg.from_args(CassandraConfig, args)
    kafka = None if args.no_lag else cfg.from_args(KafkaConfig, args)
    session = session_for(config)
    store = validate_store_name(args.store)
    status = stream_status(session, kafka, config.keyspace, store)
    found = verdicts(session, config.keyspace, store)
    if args.format == "json":
        print(json.dumps({**status.as_dict(), **found}, indent=2))
    else:
        sys.stdout.write(render(status, found))
    return 0


def render(s: StreamStatus, found: dict[str, dict | None]) -> str:
    """The status as aligned `name  value` lines. Pure."""
    state = "never run with a stream log" if s.state is None else f"{s.state} since {_iso(s.state_since_ms)}"
    if s.state_reason:
        state += f" ({s.state_reason})"
    writer = "none: no driver holds the store's lease"
    if s.writer:
        writer = f"{s.writer} since {_iso(s.writer_since_ms)}"
    batch = "none yet"
    if s.last_batch_id is not None:
        batch = f"{s.last_batch_id} at {_iso(s.last_batch_at_ms)} ({s.last_batch_age_s:,.1f} s ago)"
    lag = "not asked" if s.lag_total is None else f"{s.lag_total:,} records"
    if s.lag:
        lag += " (" + ", ".join(f"{p.topic}[{p.partition}] {p.lag:,}" for p in s.lag) + ")"
    rate = "-" if s.words_per_s is None else f"{s.words_per_s:,.1f} over the last {s.rate_batches} batch(es)"
    restart = "-" if s.last_restart_s is None else f"{s.last_restart_s:.1f} s, at {_iso(s.last_restart_at_ms)}"
    rows = [
        ("store", f"{s.store} ({s.store_type}, keyspace {s.keyspace})"),
        ("state", state),
        ("writer", writer),
        ("last batch", batch),
        ("lag", lag),
        ("words/s", rate),
        ("dead letters", f"{s.dead_letters_last_hour:,} in the last hour"),
        ("last restart", restart),
        ("event time", _iso(s.max_event_time_ms)),
    ]
    for name, label in (("last_audit", "last audit"), ("last_validation", "last validation")):
        verdict = found.get(name)
        rows.append((label, "never" if verdict is None else f"{verdict['status']} at {verdict['at']}"))
    width = max(len(name) for name, _ in rows)
    return "".join(f"{name.ljust(width)}  {value}\n" for name, value in rows)


def _iso(ms: int | None) -> str:
    return "-" if ms is None else format_instant(ms)


def _iso_of(moment) -> str:
    return moment.replace(tzinfo=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
