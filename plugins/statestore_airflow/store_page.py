"""The state stores inside Airflow's API server: a small page and the library's read-only API.

    /statestore/            the store page: stores, sizes, last audit, top keys of one store
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
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from statestore.conn.cassandra import session_for
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.errors import StateStoreError, UnsupportedOperationError
from statestore.core.model import StoreType
from statestore.http import create_app
from statestore.maintenance.units import human_bytes
from statestore.store import admin
from statestore_airflow import store_monitor
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


def page_data(
    session,
    keyspace: str,
    selected: str | None,
    top: int,
    report_dir: Path,
    kafka: KafkaConfig | None = None,
    key: str | None = None,
) -> dict[str, Any]:
    """Everything the page shows, as plain values (the template only lays it out)."""
    audit = last_audit(report_dir)
    audited = (audit or {}).get("stores", {})
    rows = []
    for listing in admin.list_stores(session, keyspace):
        described = admin.describe_store(session, keyspace, listing.spec.name, count_partitions=False)
        figures = described.as_dict()
        figures["estimated_size"] = human_bytes(figures["estimated_bytes"])
        figures["audit"] = audited.get(listing.spec.name)
        figures["stream"] = store_monitor.stream_figures(session, kafka, keyspace, listing.spec.name)
        rows.append(figures)
    names = [r["store"] for r in rows]
    selected = selected if selected in names else (names[0] if names else None)
    kind = next((r["type"] for r in rows if r["store"] == selected), None)
    top_entries, top_note, windows, sessions = [], None, None, None
    if kind is not None and StoreType(kind).windowed:
        windows = [_window_rows(w) for w in admin.latest_windows(session, keyspace, selected, LATEST_WINDOWS, top)]
    elif kind is not None and StoreType(kind).sessioned:
        sessions = [_session_row(s) for s in admin.latest_sessions(session, keyspace, selected, top)]
    elif selected is not None:
        try:
            top_entries = admin.top_entries(session, keyspace, selected, top)
        except UnsupportedOperationError as exc:
            top_note = str(exc)
    plain = kind is not None and not StoreType(kind).timed
    return {
        "keyspace": keyspace,
        "stores": rows,
        "selected": selected,
        "chart": None if selected is None else store_monitor.rate_chart(session, keyspace, selected),
        "data_docs": None if selected is None else store_monitor.data_docs(report_dir, selected),
        "lookup": store_monitor.lookup(session, keyspace, selected, key) if plain and key else None,
        "lookup_allowed": plain,
        "top": top,
        "top_entries": top_entries,
        "top_note": top_note,
        "latest_windows": windows,
        "latest_sessions": sessions,
        "audit": audit,
    }


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _window_rows(window: admin.WindowTop) -> dict[str, Any]:
    return {"start": _utc(window.start_ms), "end": _utc(window.end_ms), "top": window.top}


def _session_row(session: Any) -> dict[str, Any]:
    return {"key": session.key, "start": _utc(session.start_ms), "end": _utc(session.end_ms), "value": session.value}


def create_store_app(
    cassandra: Callable[[], CassandraConfig],
    report_dir: Callable[[], Path],
    *,
    authenticate: bool = True,
    kafka: Callable[[], KafkaConfig | None] | None = None,
    connection_id: str = CASSANDRA_CONN_ID,
) -> FastAPI:
    """The page plus the read-only API under /api, every path of both open only to Airflow users
    allowed to read the connection `connection_id` (the one `cassandra` reads). `authenticate`
    off only for tests of the page alone (outside Airflow there is no auth manager to ask).
    `kafka`: where the page and /api/metrics ask for end offsets (lag); None: no lag."""
    app = FastAPI(title="statestore in Airflow", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/api", create_app(cassandra, kafka=kafka))

    if authenticate:
        app.middleware("http")(require_connection_access(connection_id))

    @app.get("/", response_class=HTMLResponse)
    async def store_page(
        store: str | None = None, top: int = Query(10, ge=1, le=100), key: str | None = None
    ) -> HTMLResponse:
        config = cassandra()

        def collect() -> dict[str, Any]:
            streams = None if kafka is None else kafka()
            return page_data(session_for(config), config.keyspace, store, top, report_dir(), streams, key)

        try:
            data = await run_in_threadpool(collect)
        except StateStoreError as exc:
            data = {"keyspace": config.keyspace, "error": str(exc)}
        return HTMLResponse(_TEMPLATES.get_template("stores.html").render(**data))

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
