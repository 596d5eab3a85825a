"""The state stores inside Airflow's API server: a small page and the library's read-only API.

    /statestore/            the store list: state, last batch, lag, rate, size, audit per store
    /statestore/stores/X    one store: charts of its batches and state changes, top keys (or
                            windows, sessions), a key lookup, its latest audit and validation
    /statestore/reports/X   the last maintenance reports (audit_partitions.html, .json, .png)
    /statestore/api/...     statestore.http: the read-only query API (OpenAPI at /statestore/api/docs)

Nothing connects when the app is built (Airflow builds it when it loads plugins): the
Cassandra settings come from a callable, called on the first request. Every request needs an
Airflow login (the UI's session cookie or a Bearer token) whose user Airflow's auth manager
lets read the `statestore_cassandra` connection: 401 without a login, 403 without the
permission (statestore_airflow.access: the permission model, why, and how to grant it).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from statestore.conn.cassandra import session_for
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.errors import (
    InvalidNameError,
    OptionError,
    StateStoreError,
    StoreNotFoundError,
    UnsupportedOperationError,
)
from statestore.core.model import StoreType
from statestore.core.names import validate_store_name
from statestore.http import create_app
from statestore.maintenance.shared.units import human_bytes
from statestore.present import aggregates
from statestore.store import admin
from statestore.store.builder import open_session_store, open_store, open_window_store
from statestore_airflow import store_monitor, words
from statestore_airflow.access import require_connection_access
from statestore_airflow.dag_support import CASSANDRA_CONN_ID

_log = logging.getLogger(__name__)
_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=select_autoescape(["html"])
)
# Report files the page may serve: a job's name, an optional store suffix, a known extension.
_REPORT_FILE = re.compile(r"[a-z][a-z0-9_]*\.(html|md|json|png)")
AUDIT_REPORT = "audit_partitions"
LATEST_WINDOWS = 3  # window stores: the page shows the newest windows, each with its top keys
# Stores per page of the list: each row costs a few Cassandra reads and, with Kafka, an end-offset
# question, so a keyspace of hundreds of stores is listed a page at a time (BENCHMARKS.md).
STORES_PER_PAGE = 50


def last_audit(report_dir: Path) -> dict[str, Any] | None:
    """The last audit report's headline figures, or None when no audit has run yet."""
    path = report_dir / f"{AUDIT_REPORT}.json"
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return {"error": f"{path.name} cannot be read: {exc}"}
    stores = {}
    for store in report.get("stores", []):
        largest = store.get("largest") or {}
        stores[store.get("store")] = {
            "level": store.get("level"),
            "largest_bytes": largest.get("bytes"),
            "entries": store.get("entries"),
        }
    return {
        "generated_at": report.get("generated_at"),
        "status": report.get("status"),
        "stores": stores,
        "html": (report_dir / f"{AUDIT_REPORT}.html").exists(),
    }


def _env_filters(now_ms: int) -> dict[str, Any]:
    """What the templates word times and numbers with (statestore_airflow.words), at `now_ms`."""
    return {
        "ago": lambda ms: words.ago(ms, now_ms),
        "utc": words.utc,
        "iso": words.iso,
        "grouped": words.grouped,
        "duration": words.duration,
        "now_ms": now_ms,
    }


def list_data(
    session,
    keyspace: str,
    report_dir: Path,
    kafka: KafkaConfig | None = None,
    now_ms: int | None = None,
    page: int | None = 1,
    per_page: int = STORES_PER_PAGE,
) -> dict[str, Any]:
    """The store list: per store the columns that matter at a glance (the rest is the detail's),
    `per_page` stores in name order from `page` (1, 2, ...: a page past the last shows the
    last; None: every store on one page)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    audit = last_audit(report_dir)
    audited = (audit or {}).get("stores", {})
    listings = admin.list_stores(session, keyspace)  # the registry alone: names in order, cheap
    pages = max(1, -(-len(listings) // per_page)) if page is not None else 1
    page = min(max(page or 1, 1), pages)
    shown = listings if pages == 1 else listings[(page - 1) * per_page : page * per_page]
    rows = []
    ends = store_monitor.end_offsets_for(kafka, {s.progress.source_topic for s in shown if s.progress.source_topic})
    for listing in shown:
        described = admin.describe_store(session, keyspace, listing.spec.name, count_partitions=False)
        figures = described.as_dict()
        figures["estimated_size"] = human_bytes(figures["estimated_bytes"])
        figures["audit"] = audited.get(listing.spec.name)
        figures["stream"] = store_monitor.stream_figures(session, ends, keyspace, listing.spec.name)
        rows.append(figures)
    if audit and not audit.get("error"):
        audit = {**audit, "generated_ms": _instant_ms(audit.get("generated_at"))}
    first = (page - 1) * per_page + 1 if rows else 0
    paging = {"page": page, "pages": pages, "total": len(listings), "first": first, "last": first + len(rows) - 1}
    return {"keyspace": keyspace, "stores": rows, "audit": audit, "paging": paging, **_env_filters(now_ms)}


def _instant_ms(text: str | None) -> int | None:
    """An ISO instant of a report (UTC when it names no zone) in epoch ms; None: not one."""
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return round((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)


def detail_data(
    session,
    keyspace: str,
    store: str,
    top: int,
    report_dir: Path,
    kafka: KafkaConfig | None = None,
    key: str | None = None,
    now_ms: int | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    """One store's page: its figures, charts of its batches and states, its top keys (or
    windows, or sessions), a key lookup and its latest maintenance reports. An aggregate store's
    top keys show a column per measure, ranked by the measure `by` names (default: its first
    count measure), as `statestore top --by` ranks them."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    described = admin.describe_store(session, keyspace, store, count_partitions=False)
    figures = described.as_dict()
    figures["estimated_size"] = human_bytes(figures["estimated_bytes"])
    kind = StoreType(figures["type"])
    audit = last_audit(report_dir)
    top_entries, top_note, windows, sessions = [], None, None, None
    ranking: dict[str, Any] = {"top_measures": None, "top_by": None, "rankable": []}
    if kind.windowed:
        try:
            windows, ranking = _latest_windows(session, keyspace, store, top, by)
        except (UnsupportedOperationError, OptionError) as exc:
            top_note = str(exc)
    elif kind.sessioned:
        sessions, ranking = _latest_sessions(session, keyspace, store, top)
    else:
        try:
            top_entries, ranking = _top_keys(session, keyspace, store, top, by)
        except (UnsupportedOperationError, OptionError) as exc:
            top_note = str(exc)
    plain = not kind.timed
    return {
        "keyspace": keyspace,
        "store": figures,
        "selected": store,
        "stream": store_monitor.stream_figures(session, kafka, keyspace, store),
        "charts": store_monitor.batch_charts(session, keyspace, store, now_ms),
        "states": store_monitor.state_timeline(session, keyspace, store, now_ms),
        "verdicts": store_monitor.maintenance_verdicts(session, keyspace, store),
        "data_docs": store_monitor.data_docs(report_dir, store),
        "lookup": store_monitor.lookup(session, keyspace, store, key) if plain and key else None,
        "lookup_allowed": plain,
        "top": top,
        "top_entries": top_entries,
        "top_note": top_note,
        **ranking,
        "latest_windows": windows,
        "latest_sessions": sessions,
        "audit": audit,
        "audit_level": ((audit or {}).get("stores") or {}).get(store),
        **_env_filters(now_ms),
    }


def _top_keys(session, keyspace: str, store: str, top: int, by: str | None) -> tuple[list, dict[str, Any]]:
    """The store's top entries, and for an aggregate store the columns of its measures, the one
    they are ranked by and those they may be (`by` is refused on other stores, which rank by value)."""
    opened = open_store(session, keyspace, store)
    spec = aggregates.spec_of(opened.value_codec)
    if spec is None:
        if by is not None:
            raise aggregates.refuse_by(store, opened.value_codec.name)
        return admin.top_of(opened, top), {"top_measures": None, "top_by": None, "rankable": []}
    rankable = [m.name for m in spec.measures if m.kind in aggregates.RANKABLE]
    ranking = {"top_measures": aggregates.columns(spec), "top_by": by, "rankable": rankable}
    measure = aggregates.rank_measure(spec, by, store)
    ranked = aggregates.top_by(opened.all(), measure.name, top)
    return [(k, [words.measure(v) for v in results.values()]) for k, results in ranked], ranking | {
        "top_by": measure.name
    }


def _latest_windows(session, keyspace: str, store: str, top: int, by: str | None) -> tuple[list, dict[str, Any]]:
    """The newest windows with their top keys (the counts, as admin.latest_windows ranks them), and
    for a window aggregate store each key's measures, ranked by the measure `by` names (default:
    its first count measure) in each window, as `statestore top --by` ranks them."""
    opened = open_window_store(session, keyspace, store)
    spec = aggregates.spec_of(opened.value_codec)
    if spec is None:
        if by is not None:
            raise aggregates.refuse_by(store, opened.value_codec.name)
        latest = admin.latest_windows(session, keyspace, store, LATEST_WINDOWS, top)
        return [_window_rows(w.start_ms, w.end_ms, w.top) for w in latest], {
            "top_measures": None,
            "top_by": None,
            "rankable": [],
        }
    rankable = [m.name for m in spec.measures if m.kind in aggregates.RANKABLE]
    measure = aggregates.rank_measure(spec, by, store)
    newest = [(start, [(w.key, w.value) for w in found]) for start, found in opened.latest(LATEST_WINDOWS)]
    size = opened.windowing.size_ms
    windows = [
        _window_rows(start, start + size, [(k, [words.measure(v) for v in results.values()]) for k, results in ranked])
        for start, ranked in aggregates.top_windows(newest, measure.name, top)
    ]
    return windows, {"top_measures": aggregates.columns(spec), "top_by": measure.name, "rankable": rankable}


def _window_rows(start_ms: int, end_ms: int, top: list) -> dict[str, Any]:
    return {"start_ms": start_ms, "end_ms": end_ms, "top": top}


def _latest_sessions(session, keyspace: str, store: str, top: int) -> tuple[list, dict[str, Any]]:
    """The sessions that ended last (the counts, as admin.latest_sessions picks them), and for a
    session aggregate store each session's measures (ties by key then start), with their columns."""
    opened = open_session_store(session, keyspace, store)
    spec = aggregates.spec_of(opened.value_codec)
    if spec is None:
        latest = admin.latest_sessions(session, keyspace, store, top)
        return [_session_row(s, s.value) for s in latest], {"top_measures": None, "top_by": None, "rankable": []}
    latest = aggregates.latest_sessions(opened.all(), top)
    rows = [_session_row(s, [words.measure(v) for v in s.value.values()]) for s in latest]
    return rows, {"top_measures": aggregates.columns(spec), "top_by": None, "rankable": []}


def _session_row(session: Any, value: Any) -> dict[str, Any]:
    return {"key": session.key, "start_ms": session.start_ms, "end_ms": session.end_ms, "value": value}


def create_store_app(
    cassandra: Callable[[], CassandraConfig],
    report_dir: Callable[[], Path],
    *,
    authenticate: bool = True,
    kafka: Callable[[], KafkaConfig | None] | None = None,
    connection_id: str = CASSANDRA_CONN_ID,
    per_page: int = STORES_PER_PAGE,
) -> FastAPI:
    """The page plus the read-only API under /api, every path of both open only to Airflow users
    allowed to read the connection `connection_id` (the one `cassandra` reads). `authenticate`
    off only for tests of the page alone (outside Airflow there is no auth manager to ask).
    `kafka`: where the page and /api/metrics ask for end offsets (lag); None: no lag.
    `per_page`: stores per page of the list (`?page=N`)."""
    app = FastAPI(title="statestore in Airflow", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/api", create_app(cassandra, kafka=kafka))

    if authenticate:
        app.middleware("http")(require_connection_access(connection_id))

    @app.get("/", response_class=HTMLResponse, response_model=None)
    async def store_list(store: str | None = None, page: int = Query(1, ge=1)) -> HTMLResponse | RedirectResponse:
        if store is not None:  # the page's earlier address of a store: ?store=NAME
            return RedirectResponse(f"stores/{quote(store, safe='')}", status_code=307)
        config = cassandra()

        def collect() -> dict[str, Any]:
            streams = None if kafka is None else kafka()
            return list_data(session_for(config), config.keyspace, report_dir(), streams, page=page, per_page=per_page)

        try:
            data = await run_in_threadpool(collect)
        except StateStoreError as exc:
            data = {"keyspace": config.keyspace, "error": str(exc)}
        return HTMLResponse(_TEMPLATES.get_template("stores.html").render(**data))

    @app.get("/stores/{name}", response_class=HTMLResponse)
    async def store_detail(
        name: str, top: int = Query(10, ge=1, le=100), key: str | None = None, by: str | None = None
    ) -> HTMLResponse:
        config = cassandra()

        def collect() -> dict[str, Any]:
            store = validate_store_name(name)
            streams = None if kafka is None else kafka()
            return detail_data(session_for(config), config.keyspace, store, top, report_dir(), streams, key, by=by)

        status = 200
        try:
            data = await run_in_threadpool(collect)
        except StateStoreError as exc:  # no such store (404), or Cassandra did not answer
            data = {"keyspace": config.keyspace, "selected": name, "error": str(exc)}
            status = 404 if isinstance(exc, StoreNotFoundError | InvalidNameError) else 200
        return HTMLResponse(_TEMPLATES.get_template("store.html").render(**data), status_code=status)

    @app.get("/reports/validate_idempotency/{store}/{path:path}")
    async def validation_report(store: str, path: str) -> FileResponse:
        try:
            found = store_monitor.validation_file(report_dir(), store, path)
        except StateStoreError:  # not a store name
            found = None
        if found is None:
            raise HTTPException(404, f"no validation report {path!r} of store {store!r}")
        return FileResponse(found)

    @app.get("/reports/{name}")
    async def report_file(name: str) -> FileResponse:
        path = report_dir() / name
        if not _REPORT_FILE.fullmatch(name) or not path.is_file():
            raise HTTPException(404, f"no report {name!r}")
        return FileResponse(path)

    return app
