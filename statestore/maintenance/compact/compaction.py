"""Compaction of state: prune versioned history, measure tombstones, ask Cassandra to compact.

Per store:
1. Cassandra's figures before (after a flush, so recent writes and deletions count);
2. versioned stores with a history retention: old versions and logically deleted keys are
   dropped (statestore.maintenance.compact.prune, in Spark tasks);
3. the figures again; when the estimated ratio of droppable tombstones (tombstones older than
   gc_grace_seconds, which a compaction purges) passes the threshold, `nodetool
   compact` (or `garbagecollect`) runs, and the figures are read a third time. Without
   nodetool the report names the command to run.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from statestore.core.codecs import millis_of
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError, NodetoolError
from statestore.core.event_time import instant_to_millisecond
from statestore.core.model import StoreSpec
from statestore.maintenance.compact.prune import PruneSummary, prune_task
from statestore.maintenance.shared.crosscheck import CassandraFigures, figures_of
from statestore.maintenance.shared.scan import default_ranges, run_over_ranges, shape_of, token_splits
from statestore.maintenance.shared.selection import TimeBasis, expiry_cutoff, tombstone_action
from statestore.maintenance.shared.stores import stores_to_run
from statestore.store.book import history, registry

_log = logging.getLogger("statestore.maintenance.compact.compaction")
# compact: a major compaction merges every SSTable and purges droppable tombstones (with
# size-tiered compaction it leaves one large SSTable); garbagecollect: per-SSTable, gentler,
# but a tombstone shadowing data in another SSTable stays until a later pass.
COMPACTIONS = ("compact", "garbagecollect", "off")


@dataclass(frozen=True)
class CompactOptions:
    history_retention_ms: int | None = None
    basis: TimeBasis = TimeBasis.STREAM
    tombstone_threshold: float = 0.2
    cassandra_compaction: str = "compact"
    dry_run: bool = False
    token_ranges: int | None = None
    page_size: int = 5000
    concurrency: int = 16

    def __post_init__(self) -> None:
        if self.cassandra_compaction not in COMPACTIONS:
            raise ConfigError(
                f"cassandra compaction {self.cassandra_compaction!r}: use one of {', '.join(COMPACTIONS)}"
            )
        if not 0 <= self.tombstone_threshold <= 1:
            raise ConfigError(f"the tombstone threshold is a ratio from 0 to 1, got {self.tombstone_threshold}")


@dataclass
class StoreCompaction:
    store: str
    store_type: str
    gc_grace_seconds: int | None
    cutoff: str | None
    cutoff_ms: int | None
    pruned: PruneSummary | None
    before: CassandraFigures
    after_pruning: CassandraFigures
    after_compaction: CassandraFigures | None
    tombstone_ratio: float | None
    action: str
    notes: list[str] = field(default_factory=list)


@dataclass
class CompactionReport:
    keyspace: str
    generated_at: str
    options: CompactOptions
    seconds: float
    stores: list[StoreCompaction]


def _gc_grace(session, spec: StoreSpec) -> int | None:
    row = session.execute(
        "SELECT gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (spec.keyspace, spec.table),
    ).one()
    return None if row is None else int(row.gc_grace_seconds)


def _cutoff(session, spec: StoreSpec, options: CompactOptions, now_ms: int) -> int | None:
    if options.history_retention_ms is None or not spec.store_type.versioned:
        return None
    progress = registry.progress(session, spec.keyspace, spec.name)
    stream_ms = None if progress.max_event_time is None else millis_of(progress.max_event_time)
    return expiry_cutoff(options.basis, options.history_retention_ms, stream_ms, now_ms).at_ms


def compact_tables(session, spec: StoreSpec, figures: CassandraFigures, options: CompactOptions, nodetool):
    """Ask Cassandra to compact `spec`'s table when tombstones pile up; (action, figures after)."""
    ratio = figures.droppable_tombstone_ratio
    command = f"nodetool {options.cassandra_compaction} {spec.keyspace} {spec.table}"
    if not tombstone_action(ratio, options.tombstone_threshold):
        shown = "unknown (no nodetool)" if ratio is None else f"{ratio:.3f}"
        return f"none: droppable tombstone ratio {shown}, threshold {options.tombstone_threshold}", None
    if options.cassandra_compaction == "off" or options.dry_run:
        return f"needed (ratio {ratio:.3f} over {options.tombstone_threshold}), not run: run `{command}`", None
    began = time.monotonic()
    try:
        getattr(nodetool, options.cassandra_compaction)(spec.keyspace, spec.table)
    except NodetoolError as exc:
        return f"needed (ratio {ratio:.3f}), but {exc}; run `{command}` by hand", None
    after = figures_of(session, [spec], nodetool, percentiles=False, flush=True)[0]
    return f"ran `{command}` ({time.monotonic() - began:.1f} s): ratio was {ratio:.3f}", after


def compact(
    spark, session, config: CassandraConfig, stores: list[str] | None, options: CompactOptions, nodetool
) -> CompactionReport:
    """Compact `stores` (default: every store of the keyspace)."""
    history.ensure_table(session, config.keyspace)
    specs = stores_to_run(session, config.keyspace, stores)
    began, now_ms = time.monotonic(), int(time.time() * 1000)
    cutoffs = [_cutoff(session, spec, options, now_ms) for spec in specs]
    before = figures_of(session, specs, nodetool, percentiles=False, flush=True)
    run_at = history.now()
    targets = [
        (i, spec, shape_of(session, spec), cut) for i, (spec, cut) in enumerate(zip(specs, cutoffs, strict=True))
    ]
    targets = [t for t in targets if t[3] is not None]
    pruned: dict[int, PruneSummary] = {i: PruneSummary() for i, *_ in targets}
    for _index, spec, _shape, cut in targets:
        status = "dry-run" if options.dry_run else "running"
        history.record(session, spec.keyspace, spec.name, history.COMPACT, run_at, status, cut)
    if targets:
        ranges = token_splits(options.token_ranges or default_ranges(spark))
        work = [(n, token_range) for n in range(len(targets)) for token_range in ranges]
        task = prune_task(config, [(spec, shape, cut) for _, spec, shape, cut in targets], options)
        for n, part in run_over_ranges(spark, work, task, "pruning history"):
            pruned[targets[n][0]] = pruned[targets[n][0]].merge(part)
    results = []
    afters = figures_of(session, specs, nodetool, percentiles=False, flush=True)
    for i, (spec, after) in enumerate(zip(specs, afters, strict=True)):
        action, final = compact_tables(session, spec, after, options, nodetool)
        notes = []
        if nodetool is None:
            notes.append("nodetool is off or not found: Cassandra's figures come from system tables only")
        gc_grace = _gc_grace(session, spec)
        if gc_grace:
            notes.append(
                f"tombstones become droppable {gc_grace} s after the delete (gc_grace_seconds); until then no "
                "compaction can purge them"
            )
        result = StoreCompaction(
            store=spec.name,
            store_type=spec.store_type.value,
            gc_grace_seconds=gc_grace,
            cutoff=instant_to_millisecond(cutoffs[i]),
            cutoff_ms=cutoffs[i],
            pruned=pruned.get(i),
            before=before[i],
            after_pruning=after,
            after_compaction=final,
            tombstone_ratio=after.droppable_tombstone_ratio,
            action=action,
            notes=notes,
        )
        if i in pruned:
            summary = {"dropped_versions": pruned[i].dropped_versions, "dropped_keys": pruned[i].dropped_keys}
            status = "dry-run" if options.dry_run else "done"
            history.record(session, spec.keyspace, spec.name, history.COMPACT, run_at, status, cutoffs[i], summary)
        _log.info("store %s: %s", spec.name, action)
        results.append(result)
    return CompactionReport(
        keyspace=config.keyspace,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        options=options,
        seconds=round(time.monotonic() - began, 2),
        stores=results,
    )
