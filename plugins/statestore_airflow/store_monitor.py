"""The store page's monitoring: each store's stream (statestore.store.status: state, lag, rate,
dead letters, last restart), a small chart of words/s per recent batch, and a key lookup.
Plain values for the template; the figures' rules live in the library."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from statestore.core.errors import StateStoreError
from statestore.core.names import validate_store_name
from statestore.core.text import parse_key, to_text
from statestore.store import stream_log
from statestore.store.builder import open_store
from statestore.store.status import stream_status

CHART_BATCHES = 30
CHART_WIDTH, CHART_HEIGHT = 360, 80
VALIDATION_REPORTS = "validate_idempotency"


def stream_figures(session, kafka, keyspace: str, store: str) -> dict[str, Any]:
    """The row's monitoring cells; without Kafka (or when it does not answer) no lag."""
    status = stream_status(session, kafka, keyspace, store, lenient=True)
    return {
        "state": status.state or "never streamed",
        "writer_up": status.writer_up,
        "lag": status.lag_total,
        "words_per_s": status.words_per_s,
        "dead_letters_hour": status.dead_letters_last_hour,
        "restart_s": status.last_restart_s,
    }


def rate_chart(session, keyspace: str, store: str) -> dict[str, Any]:
    """Words/s of each of the last CHART_BATCHES batches, oldest first, as SVG polyline points."""
    batches = list(reversed(stream_log.recent_batches(session, keyspace, store, CHART_BATCHES)))
    rates = [round(b.words / b.seconds, 1) if b.seconds > 0 else 0.0 for b in batches]
    if not rates:
        return {"rates": [], "points": "", "max": 0.0, "first": None, "last": None}
    top = max(rates) or 1.0
    step = CHART_WIDTH / max(1, len(rates) - 1)
    points = " ".join(
        f"{i * step:.1f},{CHART_HEIGHT - rate / top * (CHART_HEIGHT - 4) - 2:.1f}" for i, rate in enumerate(rates)
    )
    return {
        "rates": rates,
        "points": points,
        "max": max(rates),
        "first": batches[0].batch_id,
        "last": batches[-1].batch_id,
    }


def lookup(session, keyspace: str, store: str, key: str) -> dict[str, Any]:
    """One key's value, read as the CLI's `get` reads it (the store's key codec parses it)."""
    try:
        opened = open_store(session, keyspace, store)
        value = opened.get(parse_key(key, opened.key_codec))
    except StateStoreError as exc:
        return {"key": key, "error": str(exc)}
    return {"key": key, "found": value is not None, "value": None if value is None else to_text(value)}


def data_docs(report_dir: Path, store: str) -> str | None:
    """The page-relative link of the store's latest validation Data Docs, if any."""
    index = report_dir / VALIDATION_REPORTS / validate_store_name(store) / "data_docs" / "index.html"
    return f"reports/{VALIDATION_REPORTS}/{store}/data_docs/index.html" if index.is_file() else None


def validation_file(report_dir: Path, store: str, path: str) -> Path | None:
    """A file of the store's validation reports, never outside them (None: not there)."""
    base = (report_dir / VALIDATION_REPORTS / validate_store_name(store)).resolve()
    target = (base / path).resolve()
    return target if target.is_relative_to(base) and target.is_file() else None
