"""Pruning of versioned stores' history, in Spark tasks over token ranges.

Per key, `selection.versions_to_drop` picks the history older than the retention (the latest
version always stays) and the keys deleted before it (all their versions go). Each key's
picks are dropped with the versioned store's own `delete_versions`, `USING TIMESTAMP` of the
newest write time read among them: a version the stream rewrites meanwhile carries a later
timestamp and survives. statestore.maintenance.compact.compaction drives it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from cassandra.cluster import EXEC_PROFILE_DEFAULT

from statestore.conn.cassandra import prepare, session_for
from statestore.core.config import CassandraConfig
from statestore.core.model import StoreSpec
from statestore.maintenance.shared.scan import TableShape
from statestore.maintenance.shared.selection import VersionRow, versions_to_drop
from statestore.store.tables import table_for
from statestore.store.tables.paging import paged

_SAMPLE = 20
_PENDING = 500


@dataclass
class PruneSummary:
    """What pruning one token range found and did; `merge` adds them up (pure)."""

    keys: int = 0
    versions: int = 0
    tombstone_versions: int = 0
    dropped_versions: int = 0
    dropped_keys: int = 0
    seconds: float = 0.0
    dropped_key_sample: list[str] = field(default_factory=list)

    def merge(self, other: PruneSummary) -> PruneSummary:
        return PruneSummary(
            self.keys + other.keys,
            self.versions + other.versions,
            self.tombstone_versions + other.tombstone_versions,
            self.dropped_versions + other.dropped_versions,
            self.dropped_keys + other.dropped_keys,
            self.seconds + other.seconds,
            (self.dropped_key_sample + other.dropped_key_sample)[:_SAMPLE],
        )


def _select(shape: TableShape) -> str:
    columns = ", ".join((*shape.key_columns, "valid_from", "value", "writetime(valid_from)"))
    return f"SELECT {columns} FROM {shape.qualified} WHERE {shape.token()} >= ? AND {shape.token()} <= ?"


def _versions_by_key(rows) -> Iterator[list]:
    """Rows in token order, grouped by key (a key's versions are contiguous: one partition,
    or one clustering prefix of it)."""
    group: list = []
    for row in rows:
        if group and row.key != group[0].key:
            yield group
            group = []
        group.append(row)
    if group:
        yield group


def prune_range(session, spec: StoreSpec, shape: TableShape, token_range, cutoff_ms: int, options) -> PruneSummary:
    """Drop the old history of the keys in one token range."""
    select = prepare(session, _select(shape))
    select.is_idempotent = True
    table = table_for(spec)
    summary, pending = PruneSummary(), []
    began = time.monotonic()

    def flush() -> None:
        if pending and not options.dry_run:
            with ThreadPoolExecutor(options.concurrency) as pool:
                list(pool.map(lambda item: table.delete_versions(session, *item), pending))
        pending.clear()

    for rows in _versions_by_key(paged(session, select, token_range, options.page_size, EXEC_PROFILE_DEFAULT)):
        versions = [VersionRow(r.valid_from, r.valid_to, r.value is None) for r in rows]
        summary.keys += 1
        summary.versions += len(versions)
        summary.tombstone_versions += sum(v.tombstone for v in versions)
        drop, whole_key = versions_to_drop(versions, cutoff_ms)
        if not drop:
            continue
        dropped = set(drop)
        write_ts = max(r[-1] for r in rows if r.valid_to in dropped)
        pending.append((bytes(rows[0].key), drop, write_ts))
        summary.dropped_versions += len(drop)
        if whole_key:
            summary.dropped_keys += 1
            if len(summary.dropped_key_sample) < _SAMPLE:
                summary.dropped_key_sample.append(bytes(rows[0].key).decode("utf-8", errors="replace"))
        if len(pending) >= _PENDING:
            flush()
    flush()
    summary.seconds = time.monotonic() - began
    return summary


def prune_task(config: CassandraConfig, targets: list[tuple[StoreSpec, TableShape, int]], options):
    def run(items) -> Iterator[tuple[int, PruneSummary]]:

        session = session_for(config)
        for index, token_range in items:
            spec, shape, cutoff_ms = targets[index]
            yield index, prune_range(session, spec, shape, token_range, cutoff_ms, options)

    return run
