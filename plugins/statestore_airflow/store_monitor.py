"""The store page's monitoring: each store's stream (statestore.store.book.status: state, lag, rate,
dead letters, last restart), the charts of its recent batches and state changes from the
stream log, its latest maintenance verdicts, and a key lookup. Plain values (and SVG markup
from statestore_airflow.charts) for the templates; the figures' rules live in the library."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from statestore.conn.cassandra import table_metadata
from statestore.conn.kafka import end_offsets_of_topics, end_offsets_source
from statestore.core.codecs import millis_of
from statestore.core.config import KafkaConfig
from statestore.core.errors import KafkaError, StateStoreError
from statestore.core.names import validate_store_name
from statestore.present import aggregates
from statestore.present.text import parse_key, to_text
from statestore.store.book import history, stream_log
from statestore.store.book.status import EndOffsets, dead_letters_between, last_recorded_before, stream_status
from statestore.store.book.stream_log import BatchRecord, StateChange
from statestore.store.builder import open_store
from statestore_airflow import charts
from statestore_airflow.words import clock, measure, utc

CHART_BATCHES = 60  # the batch charts show this many recent batches
DEAD_LETTER_HOURS = 6  # dead letters per hour over this many hours
TIMELINE_CHANGES = 40  # state changes on the timeline (and in its table)
HOUR_MS = 3_600_000
VALIDATION_REPORTS = "validate_idempotency"


def end_offsets_for(kafka: KafkaConfig | None, topics: Iterable[str]) -> EndOffsets | None:
    """End offsets of `topics` asked once, for a page of stores (each store asking would open
    a Kafka client of its own); a Kafka that does not answer fails each store's lag alone, as
    stream_figures then shows."""
    if kafka is None:
        return None
    try:
        ends = end_offsets_of_topics(kafka, topics)
    except KafkaError as exc:
        failure = exc

        def unanswered(_topic: str):
            raise failure

        return unanswered
    return ends.get


def stream_figures(session, kafka: KafkaConfig | EndOffsets | None, keyspace: str, store: str) -> dict[str, Any]:
    """The stream's figures (without Kafka, or when it does not answer, no lag). `kafka`: the
    settings to ask with, or the end offsets already asked (end_offsets_for). `state` is the
    store's writer's run's state (statestore.store.book.status.store_state), never a run that
    was refused at the lease."""
    source = kafka if callable(kafka) else end_offsets_source(kafka)
    s = stream_status(session, source, keyspace, store, lenient=True)
    return {
        "state": s.state or "never streamed",
        "state_since_ms": s.state_since_ms,
        "state_reason": s.state_reason,
        "writer": s.writer,
        "writer_since_ms": s.writer_since_ms,
        "writer_up": s.writer_up,
        # A run recorded as live whose driver holds no lease any more (killed, or lost it).
        "writer_gone": s.state in stream_log.ACTIVE and not s.writer_up,
        "lag": s.lag_total,
        "lag_parts": [(f"{p.topic}[{p.partition}]", p.lag) for p in s.lag],
        "kafka_error": s.kafka_error,
        "words_per_s": s.words_per_s,
        "rate_batches": s.rate_batches,
        "dead_letters_hour": s.dead_letters_last_hour,
        "restart_s": s.last_restart_s,
        "restart_at_ms": s.last_restart_at_ms,
        "last_batch_id": s.last_batch_id,
        "last_batch_at_ms": s.last_batch_at_ms,
        "max_event_time_ms": s.max_event_time_ms,
        "totals": {"written": s.totals.written, "words": s.totals.words},
    }


def _batch_label(b: BatchRecord) -> str:
    return f"batch {b.batch_id:,}" + ("" if b.recorded_at_ms is None else f" · {clock(b.recorded_at_ms)}")


def batch_charts(session, keyspace: str, store: str, now_ms: int | None = None) -> dict[str, Any]:
    """The charts of the store's last CHART_BATCHES batches (oldest first): duration, rows
    written, event-time lag (commit time minus the newest event time, where recorded), and its
    dead letters per hour over the last DEAD_LETTER_HOURS hours (from the batches' running sums)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    newest_first = stream_log.recent_batches(session, keyspace, store, CHART_BATCHES)
    batches = list(reversed(newest_first))
    first = "" if not batches else f"batch {batches[0].batch_id:,}"
    last = "" if not batches else f"batch {batches[-1].batch_id:,}"
    durations = [charts.Point(b.seconds, _batch_label(b)) for b in batches]
    written = [charts.Point(b.written, _batch_label(b)) for b in batches]
    lagged = [b for b in batches if b.max_event_time_ms is not None and b.recorded_at_ms is not None]
    lag = [charts.Point(max(0, b.recorded_at_ms - b.max_event_time_ms) / 1000, _batch_label(b)) for b in lagged]
    hours = dead_letters_per_hour(session, keyspace, store, newest_first[0] if newest_first else None, now_ms)
    return {
        "batches": len(batches),
        "first": batches[0].batch_id if batches else None,
        "last": batches[-1].batch_id if batches else None,
        "duration": charts.series_chart(
            "chart-duration", durations, title="Batch duration", unit="s", first=first, last=last
        ),
        "written": charts.series_chart(
            "chart-written", written, title="Rows written per batch", unit="rows", kind="bars", first=first, last=last
        ),
        "lag": None
        if not lag
        else charts.series_chart(
            "chart-lag",
            lag,
            title="Event-time lag at commit",
            unit="s",
            first=f"batch {lagged[0].batch_id:,}",
            last=f"batch {lagged[-1].batch_id:,}",
        ),
        "dead_letters": charts.series_chart(
            "chart-dead-letters",
            hours,
            title=f"Dead letters per hour, last {DEAD_LETTER_HOURS} hours",
            unit="letters",
            kind="bars",
            first=f"{DEAD_LETTER_HOURS} h ago",
            last="now",
        ),
        "dead_letters_total": sum(p.value for p in hours),
        "dead_letters_note": f"{sum(p.value for p in hours):,} in the last {DEAD_LETTER_HOURS} hours, per hour.",
    }


def dead_letters_per_hour(
    session, keyspace: str, store: str, newest: BatchRecord | None, now_ms: int
) -> list[charts.Point]:
    """Dead letters of the batches recorded in each of the last DEAD_LETTER_HOURS hours
    (oldest first), each hour's from the running sums at its two ends (a bisection of batch
    ids per boundary, as `statestore status` counts the last hour's)."""
    bounds = [now_ms - (DEAD_LETTER_HOURS - i) * HOUR_MS for i in range(DEAD_LETTER_HOURS)]
    if newest is None:
        counts = [0] * DEAD_LETTER_HOURS
    else:

        def probe(batch_id: int) -> BatchRecord | None:
            return stream_log.batch_at_or_before(session, keyspace, store, batch_id)

        before = [last_recorded_before(newest, bound, probe) for bound in bounds]
        ends = [*before[1:], newest]
        counts = [
            dead_letters_between(end, start) if end is not None else 0 for start, end in zip(before, ends, strict=True)
        ]
    return [
        charts.Point(count, f"{clock(bound)} – {clock(bound + HOUR_MS)}")
        for bound, count in zip(bounds, counts, strict=True)
    ]


def state_timeline(session, keyspace: str, store: str, now_ms: int | None = None) -> dict[str, Any]:
    """The store's last TIMELINE_CHANGES state changes as a timeline (one lane per run) and as
    rows (newest first)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    states = stream_log.recent_states(session, keyspace, store, TIMELINE_CHANGES)
    changes = [
        charts.Change(s.state, s.at_ms, _run_of(s), f"{s.state} at {utc(s.at_ms)}" + (f": {s.reason}" * bool(s.reason)))
        for s in states
    ]
    oldest = min((s.at_ms for s in states), default=None)
    return {
        "chart": charts.timeline(
            "chart-states", changes, now_ms, first="" if oldest is None else utc(oldest), last="now"
        ),
        "rows": [
            {"state": s.state, "at_ms": s.at_ms, "run": _run_of(s), "reason": s.reason, "writer": s.writer}
            for s in states
        ],
        "count": len(states),
    }


def _run_of(change: StateChange) -> str:
    """A change's run: its writer name, else (rows of an older release) its run id or host:pid."""
    return change.writer or change.run_id or f"{change.host}:{change.pid}"


def maintenance_verdicts(session, keyspace: str, store: str) -> dict[str, Any]:
    """The store's latest audit and validation runs from the maintenance history (None: never)."""
    known = table_metadata(session, keyspace, history.TABLE) is not None
    found = {}
    for name, job in (("audit", history.AUDIT), ("validation", history.VALIDATE)):
        runs = history.runs(session, keyspace, store, job, 1) if known else []
        found[name] = None if not runs else {"status": runs[0].status, "at_ms": millis_of(runs[0].run_at)}
    return found


def lookup(session, keyspace: str, store: str, key: str) -> dict[str, Any]:
    """One key's value, read as the CLI's `get` reads it (the store's key codec parses it); an
    aggregate store's also as `measures`, (column, result as the page words it) in order."""
    try:
        opened = open_store(session, keyspace, store)
        value = opened.get(parse_key(key, opened.key_codec))
    except StateStoreError as exc:
        return {"key": key, "error": str(exc)}
    found = {"key": key, "found": value is not None, "value": None if value is None else to_text(value)}
    spec = aggregates.spec_of(opened.value_codec)
    if spec is not None and value is not None:
        found["value"] = aggregates.value_text(value)
        found["measures"] = list(zip(aggregates.columns(spec), map(measure, value.values()), strict=True))
    return found


def data_docs(report_dir: Path, store: str) -> str | None:
    """The link of the store's latest validation Data Docs, relative to /statestore/, if any."""
    index = report_dir / VALIDATION_REPORTS / validate_store_name(store) / "data_docs" / "index.html"
    return f"reports/{VALIDATION_REPORTS}/{store}/data_docs/index.html" if index.is_file() else None


def validation_file(report_dir: Path, store: str, path: str) -> Path | None:
    """A file of the store's validation reports, never outside them (None: not there)."""
    base = (report_dir / VALIDATION_REPORTS / validate_store_name(store)).resolve()
    target = (base / path).resolve()
    return target if target.is_relative_to(base) and target.is_file() else None
