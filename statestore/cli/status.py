"""`statestore status STORE`: how the store's stream is doing (statestore.store.book.status), with
the last audit and validation verdicts of the maintenance history; `statestore describe STORE`:
what the store is (statestore.store.admin.describe_store)."""

from __future__ import annotations

from datetime import UTC

from statestore.cli.args import FORMATS, add_format, add_store
from statestore.cli.output import emit_record, name_value_lines
from statestore.conn.cassandra import session_for, table_metadata
from statestore.conn.kafka import end_offsets_source
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.event_time import format_instant
from statestore.core.retention import format_retention
from statestore.store.admin import StoreDescription, describe_store
from statestore.store.book import history
from statestore.store.book.status import StreamStatus, stream_status

_RECORD_HELP = " (one record: csv is a header row of its fields and one row, nested values as JSON)"


def add_command(command) -> None:
    p = command("status", cmd_status, "how a store's stream is doing: state, writer, lag, rate", kafka=())
    add_store(p)
    add_format(p, FORMATS, "table", _RECORD_HELP)
    p.add_argument("--no-lag", action="store_true", help="do not ask Kafka for its end offsets (no lag)")

    p = command(
        "describe",
        cmd_describe,
        "what a store is: type, layout, codecs, table options, Cassandra's size figures (with the nodes "
        "that answered), writer and progress",
    )
    add_store(p)
    add_format(p, FORMATS, "table", _RECORD_HELP)
    p.add_argument(
        "--count-partitions",
        action="store_true",
        help="partitioned stores: count the entries of each partition exactly (SELECT COUNT(*) per partition: "
        "reads the whole store)",
    )


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
    status = stream_status(session, end_offsets_source(kafka), config.keyspace, args.store)
    found = verdicts(session, config.keyspace, args.store)
    emit_record({**status.as_dict(), **found}, args.format, render(status, found) if args.format == "table" else "")
    return 0


def cmd_describe(args) -> int:
    config = cfg.from_args(CassandraConfig, args)
    found = describe_store(session_for(config), config.keyspace, args.store, count_partitions=args.count_partitions)
    emit_record(found.as_dict(), args.format, render_description(found) if args.format == "table" else "")
    return 0


def render_description(d: StoreDescription) -> str:
    """The description as aligned `name  value` lines. Pure."""
    spec, progress = d.spec, d.progress
    answered = f"from {d.nodes_answered} of {d.nodes_total} node(s)"
    if d.size is None:
        size = f"no estimate yet (Cassandra's covers flushed data, refreshed every few minutes), {answered}"
    else:
        size = f"about {d.size.partitions:,} Cassandra partitions, {d.size.total_bytes:,} bytes, {answered}"
    largest = "-" if d.max_partition_mib is None else f"{d.max_partition_mib:,} MiB"
    rows = [
        ("store", f"{spec.name} ({spec.store_type.value}, keyspace {spec.keyspace})"),
        ("table", f"{spec.keyspace}.{spec.table}" + ("" if d.schema_cql else " (missing: not created or dropped)")),
        (  # the store's own partitions (Kafka's); the size row counts Cassandra's
            "store partitions",
            str(spec.partitions) + (f" x {spec.subpartitions} sub-partitions" if spec.subpartitions > 1 else ""),
        ),
        ("codecs", f"key {spec.key_codec}, value {spec.value_codec}"),
        ("windowing", "-" if spec.windowing is None else spec.windowing.summary()),
        ("retention", format_retention(spec.retention_ms)),
    ]
    if d.table_options is not None:
        o = d.table_options
        ttl = "none" if not o.default_time_to_live else f"{o.default_time_to_live:,} s"
        grace = "-" if o.gc_grace_seconds is None else f"{o.gc_grace_seconds:,} s"
        rows.append(("options", f"compaction {o.compaction or '-'}, default TTL {ttl}, gc grace {grace}"))
    rows += [("size", size), ("largest partition", largest)]
    if d.partition_stats is not None:
        stats = d.partition_stats
        skew = "-" if stats.skew is None else f"{stats.skew:.2f}"
        entries = ", ".join(f"{n:,}" for n in stats.entries)
        rows.append(("entries", f"{stats.total:,} exactly ({entries} by partition; skew {skew})"))
    writer = "none: no driver holds the store's lease" if d.writer is None else d.writer.holder
    batch = "none yet"
    if progress.last_batch_id is not None:
        batch = f"{progress.last_batch_id} at {_iso_of(progress.last_batch_at) if progress.last_batch_at else '-'}"
    rows += [
        ("writer", writer),
        ("last batch", batch),
        ("event time", "-" if progress.max_event_time is None else _iso_of(progress.max_event_time)),
        ("topic", progress.source_topic or "-"),
    ]
    return name_value_lines(rows)


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
    return name_value_lines(rows)


def _iso(ms: int | None) -> str:
    return "-" if ms is None else format_instant(ms)


def _iso_of(moment) -> str:
    return moment.replace(tzinfo=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
