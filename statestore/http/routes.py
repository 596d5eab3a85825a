"""The endpoints. Handlers are plain functions, which FastAPI runs in its thread pool: the library's
reads block, and the driver's session is shared safely between threads. The most frequent
request, a point get on a warm key-value store, is answered before it reaches these routes, on
the event loop (statestore.http.fast_get); `get_key` serves every other point get."""

from __future__ import annotations

from itertools import islice
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from statestore.core.errors import StateStoreError, UnsupportedOperationError
from statestore.core.model import EVERYTHING, KeyRange
from statestore.http import models
from statestore.http.answers import KeyNotFoundError
from statestore.http.catalog import StoreCatalog
from statestore.http.paging import WindowQuery, read_page, read_window_page, resume, resume_window, token_ordered
from statestore.present import aggregates
from statestore.present.text import key_syntax, parse_key, require_versioned, to_json, versioned
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.table_stats import cluster_figures
from statestore.store.tables.versioned_base import OPEN_END

MAX_LIMIT = 10_000
MAX_MS = OPEN_END - 1  # version times are 0 <= t < 2**63 - 1 epoch ms
_ERRORS = {
    400: {"model": models.ErrorBody, "description": "bad parameters, or an operation the store type does not support"},
    404: {"model": models.ErrorBody, "description": "no such store (or key)"},
    500: {"model": models.ErrorBody, "description": "a stored key or value does not decode with the store's codec"},
    503: {"model": models.ErrorBody, "description": "Cassandra is unreachable or timed out"},
}

router = APIRouter(tags=["stores"], responses=_ERRORS)

StoreName = Annotated[str, Path(description="the store's name (see GET /stores)")]
KeyText = Annotated[str, Path(description="the key as text, read with the store's key codec (see GET /stores/{store})")]
PageToken = Annotated[str | None, Query(description="next_page_token of the previous page")]


async def catalog(request: Request) -> StoreCatalog:
    # async: FastAPI would run a plain-function dependency in its thread pool, a hop per request.
    return request.app.state.catalog


Catalog = Annotated[StoreCatalog, Depends(catalog)]


def _summary(spec) -> models.StoreSummary:
    return models.StoreSummary(
        name=spec.name,
        type=spec.store_type.value,
        table=spec.table,
        partitions=spec.partitions,
        subpartitions=spec.subpartitions,
        key_codec=spec.key_codec,
        value_codec=spec.value_codec,
    )


@router.get("/stores", summary="List the stores of the keyspace")
def list_stores(catalog: Catalog) -> models.StoreList:
    keyspace = catalog.keyspace
    listings = admin.list_stores(catalog.session(), keyspace)
    return models.StoreList(keyspace=keyspace, stores=[_summary(listing.spec) for listing in listings])


@router.get("/stores/{store}", summary="Describe a store: layout, codecs, what it supports, progress")
def describe_store(store: StoreName, catalog: Catalog) -> models.StoreDescription:
    handle = _any_store(catalog, store)
    spec = handle.spec
    progress = registry.progress(handle.session, spec.keyspace, spec.name)
    timed = spec.store_type.timed
    partitioned = spec.store_type.partitioned and not timed
    figures = cluster_figures(handle.session, spec.keyspace, spec.table)
    return models.StoreDescription(
        **_summary(spec).model_dump(),
        keyspace=spec.keyspace,
        key_syntax=key_syntax(handle.key_codec),
        approximate_entries=handle.approximate_num_entries(),
        size_nodes_answered=figures.nodes_answered,
        size_nodes_total=figures.nodes_total,
        retention_ms=spec.retention_ms,
        progress=models.Progress(
            last_batch_id=progress.last_batch_id,
            last_batch_at=progress.last_batch_at,
            max_event_time=progress.max_event_time,
            source_topic=progress.source_topic,
        ),
        supports=models.Capabilities(
            range=partitioned,
            prefix=partitioned,
            reverse=partitioned,
            history=versioned(handle),
            windows=spec.store_type.windowed,
            sessions=spec.store_type.sessioned,
            entries_order="token" if token_ordered(handle) else "key",
        ),
        measures=_measures(handle),
    )


def _measures(handle) -> list[models.MeasureInfo] | None:
    spec = aggregates.spec_of(handle.value_codec)
    if spec is None:
        return None
    return [models.MeasureInfo(name=m.name, aggregation=m.kind, field=m.field) for m in spec.measures]


def _any_store(catalog: StoreCatalog, store: str):
    """The store's handle whatever its type: key-value and versioned stores open as such (and
    refuse window types, naming them), window stores as WindowStores."""
    try:
        return catalog.store(store)
    except UnsupportedOperationError:
        spec = registry.lookup(catalog.session(), catalog.keyspace, store)
        return catalog.session_store(store) if spec.store_type.sessioned else catalog.window_store(store)


@router.get("/stores/{store}/keys/{key:path}", summary="Get one key (versioned stores: as of a time)")
def get_key(
    store: StoreName,
    key: KeyText,
    catalog: Catalog,
    as_of: Annotated[int | None, Query(ge=0, le=MAX_MS, description="epoch ms: the version valid then")] = None,
) -> models.Record:
    # fast_get answered this already unless the store's handle is cold or as_of is set.
    handle = catalog.store(store)
    parsed = parse_key(key, handle.key_codec)
    if as_of is None:
        return record_for(handle, key, parsed, handle.get(parsed))
    require_versioned(handle, "as-of reads")
    return record_for(handle, key, parsed, handle.get(parsed, as_of=as_of), as_of)


def record_for(handle, key: str, parsed, found, as_of: int | None = None) -> models.Record:
    """The answer for `found`: a value (key-value stores), a VersionedRecord, or None (404)."""
    if found is None:
        when = "" if as_of is None else f" as of {as_of} ms"
        raise KeyNotFoundError(f"key {key!r} is not in store '{handle.spec.name}'{when}")
    if not versioned(handle):
        return models.Record(key=to_json(parsed), value=to_json(found))
    return models.Record(
        key=to_json(parsed), value=to_json(found.value), valid_from=found.valid_from, valid_to=found.valid_to
    )


@router.get("/stores/{store}/entries", summary="Scan a store: all, a key range or a prefix, page by page")
def list_entries(
    store: StoreName,
    catalog: Catalog,
    from_: Annotated[str | None, Query(alias="from", description="lowest key, inclusive")] = None,
    to: Annotated[str | None, Query(description="highest key, inclusive")] = None,
    prefix: Annotated[str | None, Query(description="keys starting with this (not with from/to)")] = None,
    reverse: Annotated[bool, Query(description="descending key order")] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="entries per page")] = 100,
    page_token: PageToken = None,
) -> models.EntriesPage:
    handle = catalog.store(store)
    key_range = _key_range(handle, from_, to, prefix)
    cursor = resume(store, key_range, reverse, page_token)
    entries, next_token = read_page(handle, cursor, limit)
    return models.EntriesPage(
        entries=[models.KeyValue(key=to_json(k), value=to_json(v)) for k, v in map(handle.decode_entry, entries)],
        order="token" if token_ordered(handle) else "key",
        next_page_token=next_token,
    )


def _key_range(handle, from_: str | None, to: str | None, prefix: str | None) -> KeyRange:
    if prefix is not None:
        if from_ is not None or to is not None:
            raise StateStoreError("give either prefix or from/to, not both")
        return KeyRange.prefix(_raw_key(handle, prefix))
    if from_ is None and to is None:
        return EVERYTHING
    return KeyRange(_raw_key(handle, from_), _raw_key(handle, to))


def _raw_key(handle, text: str | None) -> bytes | None:
    """`text` read with the store's key syntax, as the bytes the store keeps (None stays None)."""
    return None if text is None else handle.key_codec.encode(parse_key(text, handle.key_codec))


@router.get("/stores/{store}/windows", summary="A window store's windows: one key's or every key's, page by page")
def list_windows(
    store: StoreName,
    catalog: Catalog,
    key: Annotated[str | None, Query(description="only this key's windows (the store's key syntax)")] = None,
    from_: Annotated[int, Query(alias="from", ge=0, le=MAX_MS, description="earliest window start, epoch ms")] = 0,
    to: Annotated[int, Query(ge=0, le=MAX_MS, description="latest window start, epoch ms, inclusive")] = MAX_MS,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="windows per page")] = 100,
    page_token: PageToken = None,
) -> models.WindowsPage:
    windows = catalog.window_store(store)
    query = WindowQuery(store, _raw_key(windows, key), from_, to)
    rows, next_token = read_window_page(
        lambda key_range: windows.raw_windows(key_range, from_, to),
        lambda row: (row.key, (row.start_ms,)),
        query,
        resume_window(query, page_token),
        limit,
    )
    return models.WindowsPage(
        windows=[
            models.Window(key=to_json(w.key), window_start=w.start_ms, window_end=w.end_ms, value=to_json(w.value))
            for w in map(windows.decode, rows)
        ],
        next_page_token=next_token,
    )


@router.get("/stores/{store}/sessions", summary="A session store's sessions: one key's or every key's, page by page")
def list_sessions(
    store: StoreName,
    catalog: Catalog,
    key: Annotated[str | None, Query(description="only this key's sessions (the store's key syntax)")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="sessions per page")] = 100,
    page_token: PageToken = None,
) -> models.SessionsPage:
    sessions = catalog.session_store(store)
    query = WindowQuery(store, _raw_key(sessions, key), 0, MAX_MS)
    rows, next_token = read_window_page(
        sessions.raw_sessions,
        lambda row: (row.key, (row.end_ms, row.start_ms)),
        query,
        resume_window(query, page_token),
        limit,
    )
    return models.SessionsPage(
        sessions=[
            models.SessionWindow(
                key=to_json(s.key), session_start=s.start_ms, session_end=s.end_ms, value=to_json(s.value)
            )
            for s in map(sessions.decode, rows)
        ],
        next_page_token=next_token,
    )


@router.get("/stores/{store}/history/{key:path}", summary="Every version of a key (versioned stores)")
def key_history(
    store: StoreName,
    key: KeyText,
    catalog: Catalog,
    from_: Annotated[
        int | None, Query(alias="from", ge=0, le=MAX_MS, description="epoch ms: versions valid at or after")
    ] = None,
    to: Annotated[int | None, Query(ge=0, le=MAX_MS, description="epoch ms: versions valid before")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="versions per answer")] = 1000,
) -> models.History:
    handle = catalog.store(store)
    parsed = parse_key(key, handle.key_codec)
    require_versioned(handle, "history")
    versions = list(islice(handle.history(parsed, from_, to), limit + 1))
    # Versions follow each other without gaps, so the next page starts where this one's last ends.
    next_from = versions[limit - 1].valid_to if len(versions) > limit else None
    return models.History(
        key=to_json(parsed),
        versions=[
            models.Version(value=to_json(v.value), valid_from=v.valid_from, valid_to=v.valid_to)
            for v in versions[:limit]
        ],
        next_from=next_from,
    )
