"""Which stores each scheduled maintenance job covers, and why the others are left out.

Pure selection (no I/O): the state_maintenance DAG gathers the facts of every store when it
runs, asks `plan_maintenance`, and submits one job per non-empty list. Every store left out of
a job is named with the reason, so a run never silently skips work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from statestore.core.aggregation import AGGREGATE_FORMAT_PREFIX
from statestore.core.errors import ConfigError, StoreNotFoundError
from statestore.core.model import StoreSpec, StoreType
from statestore.maintenance.shared.selection import TimeBasis
from statestore.store.book.registry import StoreProgress

EXPIRE, COMPACT, AUDIT, VALIDATE = "expire_state", "compact_state", "audit_partitions", "validate_idempotency"
JOB_ORDER = (EXPIRE, COMPACT, AUDIT, VALIDATE)


@dataclass(frozen=True)
class StoreFacts:
    """What the plan needs to know of one registered store."""

    name: str
    store_type: StoreType
    key_codec: str
    value_codec: str
    has_stream_time: bool  # the stream recorded the largest event time it applied
    has_batches: bool  # a stream has applied (or begun) a batch
    writer: str | None  # who holds the store's writer lease now (a running stream)
    has_retention: bool = False  # the store carries its own retention (statestore.core.retention)
    # Its input can be recomputed from its topic (registry.InputSettings.recomputable; no settings:
    # text lines for a word-count store, unknown for an aggregate one).
    input_recomputable: bool | None = None

    @classmethod
    def of(cls, spec: StoreSpec, progress: StoreProgress, writer: str | None) -> StoreFacts:
        return cls(
            spec.name,
            spec.store_type,
            spec.key_codec,
            spec.value_codec,
            progress.max_event_time is not None,
            progress.has_batches,
            writer,
            spec.retention_ms is not None,
            None if progress.input_settings is None else progress.input_settings.recomputable,
        )


@dataclass(frozen=True)
class Skip:
    job: str
    store: str
    reason: str


@dataclass(frozen=True)
class MaintenancePlan:
    stores: dict[str, tuple[str, ...]]  # job -> the stores it runs on, in name order
    skipped: tuple[Skip, ...]

    def as_dict(self) -> dict:
        return {
            "stores": {job: list(names) for job, names in self.stores.items()},
            "skipped": [{"job": s.job, "store": s.store, "reason": s.reason} for s in self.skipped],
        }


def _expire_reason(store: StoreFacts, retention_set: bool, basis: TimeBasis) -> str | None:
    if store.store_type.timed:
        # Windows and sessions expire by the store's own retention, always in stream time.
        if not store.has_stream_time:
            return "window store without a stream time yet (no batch applied): its windows expire by stream time"
        return None
    if not retention_set and not store.has_retention:
        return "no retention, neither the store's own nor the DAG's `retention` param: nothing is expired by default"
    if store.store_type.versioned:
        return "versioned store: old versions are pruned by compact_state's history retention"
    if basis is TimeBasis.STREAM and not store.has_stream_time:
        return "no stream time recorded yet (no batch applied): use basis=processing, or run the stream first"
    return None


def _validate_reason(store: StoreFacts) -> str | None:
    aggregate = store.value_codec.startswith(AGGREGATE_FORMAT_PREFIX) and store.key_codec == "string"
    if store.store_type.versioned or not (aggregate or (store.key_codec, store.value_codec) == ("string", "long")):
        return (
            "not a word-count store (string keys, long values, not versioned) nor an aggregate one: nothing to recount"
        )
    if aggregate and not store.input_recomputable:
        return (
            "its input cannot be recomputed from its topic (fed by a user's own query, or no input settings "
            "recorded yet): nothing to recount"
        )
    if not store.has_batches:
        return "no stream has applied a batch to it yet"
    if store.writer is not None:
        return f"a stream is writing it now (lease held by {store.writer}); validation needs a store at rest"
    return None


def plan_maintenance(
    stores: Iterable[StoreFacts],
    requested: Sequence[str] = (),
    *,
    retention_set: bool,
    basis: TimeBasis = TimeBasis.STREAM,
    jobs: Sequence[str] = (),
) -> MaintenancePlan:
    """The stores of each job: `requested` ones (empty: every registered store), for the
    `jobs` asked for (empty: all four; a job left out covers no store, each store named).

    expire: key-value stores, only with a retention, and on the stream basis only once the
    stream has recorded its time; window stores once they have a stream time (by their own
    retention); compact and audit: every store; validate: word-count stores (key-value, window,
    session) and aggregate stores that a stream has fed and that no stream writes right now.
    """
    by_name = {s.name: s for s in stores}
    unknown = sorted(set(requested) - set(by_name))
    if unknown:
        raise StoreNotFoundError(
            f"no store named {', '.join(unknown)} is registered; list the stores with `statestore stores` "
            "(or the state_store_admin DAG) and fix the `stores` param"
        )
    unknown_jobs = sorted(set(jobs) - set(JOB_ORDER))
    if unknown_jobs:
        raise ConfigError(f"no maintenance job named {', '.join(unknown_jobs)}; the jobs are {', '.join(JOB_ORDER)}")
    chosen = [by_name[n] for n in sorted(set(requested) or by_name)]
    left_out = set(JOB_ORDER) - set(jobs or JOB_ORDER)
    reasons = {
        EXPIRE: lambda s: _expire_reason(s, retention_set, basis),
        COMPACT: lambda s: None,
        AUDIT: lambda s: None,
        VALIDATE: _validate_reason,
    }
    selected: dict[str, tuple[str, ...]] = {}
    skipped: list[Skip] = []
    for job in JOB_ORDER:
        names = []
        for store in chosen:
            reason = "not among the run's `jobs`" if job in left_out else reasons[job](store)
            if reason is None:
                names.append(store.name)
            else:
                skipped.append(Skip(job, store.name, reason))
        selected[job] = tuple(names)
    return MaintenancePlan(selected, tuple(skipped))
