"""Expiry of window and session stores: drop whole segments whose every window (session) is
past the store's retention.

A window store's retention is part of the store (recorded with its windowing, and applied by
every read), and is measured in stream time: the largest event time the stream applied. So the
expire job uses the store's own retention on the stream basis, whatever retention and basis it
was given for key-value stores. Segments are in the table's partition key
(statestore.store.tables.partitioned_window, .partitioned_session: windows by start, sessions by
end): an expired segment goes with one partition delete per store partition, no scan of its rows
and no row tombstones. Which segments go is pure (WindowSpec/SessionSpec.expired_segments);
listing and dropping them are the side effects, here.

Dropping hides the windows at once, but their bytes stay on disk: the partition deletes land
in the newest TimeWindowCompactionStrategy window, and TWCS never compacts them together with
the older SSTables they shadow. So after dropping, the job flushes the table and runs `nodetool
garbagecollect` on it, which rewrites each SSTable without the rows the deletes shadow (an
expired segment's SSTables empty out and go); without nodetool the report names the command.

No race with the stream needs settling: the stream never writes a window that is closed at its
stream time, and every window of an expired segment closed before it (retention >= window +
grace; for sessions: a record more than grace older than the stream time is late, and a
session it joins ends at or after the record), so nothing the stream writes can land in a
segment being dropped.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from statestore.core.codecs import millis_of
from statestore.core.errors import FutureStreamTimeError, NodetoolError, UnsupportedOperationError
from statestore.core.event_time import format_instant
from statestore.core.model import StoreSpec
from statestore.store.book import history, registry
from statestore.store.tables import session_table_for, window_table_for

_log = logging.getLogger("statestore.maintenance.expire.segments")
_SAMPLE = 20


@dataclass(frozen=True)
class WindowExpiry:
    """What expiry did to one window store: the segments it found and those that expired."""

    retention_ms: int
    cutoff_ms: int
    stream_ms: int
    found: int
    expired: tuple[int, ...]
    segment_ms: int
    dry_run: bool
    seconds: float
    reclaim: str | None = None  # what was done (or is to be done) to free the dropped bytes

    @property
    def removed(self) -> int:
        return 0 if self.dry_run else len(self.expired)

    def sample(self) -> list[str]:
        span = self.segment_ms
        return [f"segment {s}: times {s * span} to {(s + 1) * span - 1} ms" for s in self.expired][:_SAMPLE]


def expire_window_store(session, spec: StoreSpec, dry_run: bool, nodetool=None) -> WindowExpiry:
    """Drop `spec`'s expired segments (or only find them, `dry_run`), recorded in the
    maintenance history like any expiry (cutoff: stream time - retention), then free their
    bytes with `nodetool` (None: the report names the command)."""
    table = session_table_for(spec) if spec.store_type.sessioned else window_table_for(spec)
    retention = spec.windowing.retention_ms
    moment = registry.progress(session, spec.keyspace, spec.name).max_event_time
    stream_ms = None if moment is None else millis_of(moment)
    if stream_ms is None:
        raise UnsupportedOperationError(
            f"{spec.store_type.value} store '{spec.name}' has no stream time yet (no batch applied): it expires "
            "by stream time, so there is nothing to expire; run the stream first"
        )
    cutoff_ms = stream_ms - retention
    refuse_future_cutoff(spec, cutoff_ms, stream_ms, int(time.time() * 1000))
    run_at = history.now()
    history.record(session, spec.keyspace, spec.name, history.EXPIRE, run_at, _status(dry_run, "running"), cutoff_ms)
    began = time.monotonic()
    try:
        stored = table.segments(session)
        doomed = spec.windowing.expired_segments(stored, stream_ms)
        if not dry_run:
            for segment in doomed:
                table.drop_segment(session, segment)
    except BaseException:
        if not dry_run:
            history.record(session, spec.keyspace, spec.name, history.EXPIRE, run_at, "failed", cutoff_ms)
        raise
    result = WindowExpiry(
        retention,
        cutoff_ms,
        stream_ms,
        len(stored),
        tuple(doomed),
        spec.windowing.segment_ms,
        dry_run,
        time.monotonic() - began,
        None if dry_run or not doomed else reclaim_space(spec, nodetool),
    )
    counts = {"scanned": result.found, "removed": result.removed, "would_remove": len(doomed)}
    history.record(
        session, spec.keyspace, spec.name, history.EXPIRE, run_at, _status(dry_run, "done"), cutoff_ms, counts
    )
    _log.info("window store %s: segments %s", spec.name, counts)
    return result


def refuse_future_cutoff(spec: StoreSpec, cutoff_ms: int, stream_ms: int, now_ms: int) -> None:
    """FutureStreamTimeError when expiring `spec` by its stream time `stream_ms` would cut off
    at `cutoff_ms`, later than the wall clock `now_ms`: entries younger than now are not past
    any retention, the stream time is wrong (a record far ahead of the clock, counted before
    the stream dead-lettered such records as `future`). Pure."""
    if cutoff_ms <= now_ms:
        return
    raise FutureStreamTimeError(
        f"store '{spec.name}': its stream time {stream_ms} ms ({format_instant(stream_ms)}) is in the future, so "
        f"expiry by stream time would cut off at {cutoff_ms} ms ({format_instant(cutoff_ms)}), after the wall clock "
        f"({format_instant(now_ms)}), "
        "and delete entries that are not old; nothing was deleted. Expire by processing time (--basis processing, "
        "key-value stores), or correct the store's stream time (registry max_event_time) once its future input "
        "is known, with its stream stopped (a running stream relies on its stream time only growing)"
    )


def reclaim_space(spec: StoreSpec, nodetool) -> str:
    """Free the bytes of dropped segments: flush (the deletes must be in an SSTable), then
    garbagecollect the table; returns what was done, or the command to run."""
    command = f"nodetool flush {spec.keyspace} {spec.table} && nodetool garbagecollect {spec.keyspace} {spec.table}"
    if nodetool is None:
        return f"not run (nodetool is off or not found): run `{command}` to free the dropped segments' bytes"
    began = time.monotonic()
    try:
        nodetool.flush(spec.keyspace, spec.table)
        nodetool.garbagecollect(spec.keyspace, spec.table)
    except NodetoolError as exc:
        return f"failed: {exc}; run `{command}` by hand"
    return f"ran `nodetool garbagecollect {spec.keyspace} {spec.table}` ({time.monotonic() - began:.1f} s)"


def _status(dry_run: bool, status: str) -> str:
    return "dry-run" if dry_run else status
