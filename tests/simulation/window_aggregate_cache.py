"""The apply cache for window aggregate stores in the simulator (issues 45 and 47): the cache
kind's run (cache.py: the cache on or off per run, its buckets, local mode or a cluster, the
driver's own apply, task attempts placed on executors and dying after some landings, the expire
job's marks and deletes, table TTLs set and removed between batches or during one, and the
vouching check) with the window aggregate kind's records, windowing and truth
(window_aggregates.py: the JSON records of aggregates.py per key and open window, WINDOWINGS,
WindowAggregateTruth), each task attempt's slice applied through the real
statestore.stream.aggregates.apply_window_aggregates with its bucket's file (cache=, keyed by
window_cache_key, start first), the store's stream time (stream_time_ms: no window starting
after it read, the job's rule with the apply cache on) and a table over the fake window rows;
each file opened forgets the windows closed at that stream time
(apply_windows.forget_closed_windows), as aggregate_applier has it.

The window rows live in the CachedCassandra's rows, keyed by their cache key (CachedWindows), so
its TTLs, expiry and the expire job's deletes hold for them as for key-value rows; a read notes
the rows written under a TTL (a Found's `expiring`, as the real table's `noting_ttl()` read),
which the apply must not keep in its file. The runs without a cache plan (the cache off, a
recovery, a batch the ledger does not admit) apply as the window aggregate kind does, with one
task (windows.WindowStreamJob.apply_batch), the stream time's elision on when the run has the
cache on (the job's `after`). As for window stores, the lease, paused drivers, registry
timeouts and the operator's actions are not modelled (WindowStreamJob.protocol_faults).

The invariant, besides the truth's: whatever a file vouches for of a window (its record, as an
entry, or its absence from a complete file), and every window the apply takes as new because
it starts after the stream time, plans with plan_aggregates as the store's row of that window
at that moment plans (CacheVouchedWrong). Windows the expire job deleted, or whose rows expired
under a table TTL, leave the truth of measures, never the vouching check.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from statestore.core.model import Entry, StoreSpec, WindowedEntry
from statestore.store.book.registry import BatchPosition
from statestore.store.tables.base import Found
from statestore.stream.aggregates import apply_window_aggregates
from statestore.stream.apply import ApplyStats
from statestore.stream.apply_windows import WindowKey, forget_closed_windows, window_cache_key, window_of
from tests.simulation.aggregate_cache import AggregateCacheFaults, AggregateCacheProtocolMachine, AggregateVouching
from tests.simulation.aggregates import KEYS, SPEC, AggregateProtocolMachine, AggregateStreamJob, key_text
from tests.simulation.cache import (
    OUTSIDE_EVENTS,
    TTLS_S,
    CachedCassandra,
    CachedStreamJob,
    CacheProtocolMachine,
    FakeBucketFile,
    OpenedFile,
    OutsideForgiven,
    TaskFaults,
)
from tests.simulation.driver import Step, StreamJob
from tests.simulation.fake_kafka import Record
from tests.simulation.window_aggregates import (
    WindowAggregateProtocolMachine,
    WindowAggregateStreamJob,
    WindowAggregateTruth,
    window_aggregate_batch,
)
from tests.simulation.windows import WINDOWINGS, AttemptTable, StoredWindow, WindowTable, WindowWorld, spec_of


class CachedWindows(WindowTable):
    """The window store's table (windows.WindowTable, the apply's WindowRows) over the
    CachedCassandra's rows, each window's row keyed by window_cache_key: writes `USING
    TIMESTAMP` of their batch, under the table's TTL, shadowed by the expire job's deletes; a read
    sees what has landed and has not expired, and notes the rows carrying a TTL (Found)."""

    def __init__(self, spec: StoreSpec, cassandra: CachedCassandra) -> None:
        self.spec, self.cassandra = spec, cassandra

    @property
    def rows(self) -> dict[WindowKey, StoredWindow]:  # type: ignore[override] - a view of the fake's rows
        """The stored windows (the truth's view): (key, start) -> the row and its timestamp."""
        return {
            window_of(key): StoredWindow(WindowedEntry(*window_of(key), *row.entry[1:]), row.write_ts)
            for key, row in self.cassandra.rows.items()
        }

    def read(self, session, windows: list[WindowKey], concurrency: int) -> Found:
        keys = [window_cache_key(key, start) for key, start in windows]
        found = Found()
        for key, entry in self.cassandra.read_entries(keys).items():
            window = window_of(key)
            found[window] = WindowedEntry(*window, *entry[1:])
            if key in self.cassandra.expires_at:
                found.expiring.add(window)
        return found

    def land(self, entry: WindowedEntry, write_ts: int) -> None:
        key = window_cache_key(entry.key, entry.start_ms)
        self.cassandra.write_entry(Entry(key, entry.value, entry.batch_id, entry.time_ms), write_ts)


class CapturedWindows:
    """One cached attempt's table: reads what has landed (CachedWindows.read), its writes kept
    in `captured` to land one at a time (CachedStreamJob._apply_with)."""

    def __init__(self, table: CachedWindows) -> None:
        self.table = table
        self.captured: list[WindowedEntry] = []

    def read(self, session, windows: list[WindowKey], concurrency: int) -> Found:
        return self.table.read(session, windows, concurrency)

    def write(self, session, entries: list[WindowedEntry], concurrency: int, write_ts: int | None) -> None:
        self.captured.extend(entries)


class WindowAggregateCachedStreamJob(AggregateVouching, CachedStreamJob, WindowAggregateStreamJob):
    """CachedStreamJob over a window aggregate store: without a cache plan the window aggregate
    kind's one-task apply (WindowStreamJob.apply_batch); with one, each bucket's task attempts
    through apply_window_aggregates with their file (see the module doc)."""

    faults: TaskFaults = AggregateCacheFaults()

    @classmethod
    def protocol_faults(cls) -> bool:
        """Not for window stores (see the module doc): no lease, paused drivers or registry timeouts."""
        return False

    def apply_to(self, rows: AttemptTable, deltas: list, position: BatchPosition, write_order: int) -> ApplyStats:
        """An uncached attempt's apply_window_aggregates: no window after the stream time read
        when the run has the cache on (batch_apply._aggregate's `after`), every window read when
        it is off."""
        after = position.stream_time_ms if self.cache_settings.on else None
        spec = self.windows.spec
        return apply_window_aggregates(
            None, spec, SPEC, position.batch_id, deltas, 1, position.write_ts, table=rows, stream_time_ms=after
        )

    def cached_batch_of(
        self, records: list[Record], limit_ms: int | None, position: BatchPosition
    ) -> tuple[list, object]:
        return window_aggregate_batch(records, limit_ms, self.windows.spec.windowing, position.stream_time_ms)

    def cutoff_of(self, position: BatchPosition) -> int | None:
        """None: a window store plans no retention cutoff (no closed window is written)."""
        return None

    def opened_file(self, file: FakeBucketFile, expected: str | None, fresh: bool, check, position: BatchPosition):
        """The file opened, then the windows closed at the stream time forgotten (aggregate_applier's on_open)."""
        opened = OpenedFile(file, expected, fresh, check)
        forget_closed_windows(self.windows.spec, position.stream_time_ms)(opened)
        return opened

    def capturing_table(self) -> CapturedWindows:
        return CapturedWindows(self.windows.table)

    def apply_cached(self, table, group: list, position: BatchPosition, opened, cutoff: int | None) -> ApplyStats:
        return apply_window_aggregates(
            None,
            self.windows.spec,
            SPEC,
            position.batch_id,
            group,
            1,
            position.write_ts,
            table=table,
            stream_time_ms=position.stream_time_ms,
            cache=opened,
        )

    def land_cached(self, entry: WindowedEntry, write_ts: int) -> None:
        self.windows.table.land(entry, write_ts)

    def shown_write(self, entry: WindowedEntry) -> str:
        return f"key {entry.key.decode()!r} window {entry.start_ms}"

    def shown_key(self, key: bytes) -> str:
        name, start = window_of(key)
        return f"{name.decode()!r} window {start}"

    def known_new(self, key: bytes, position: BatchPosition) -> bool:
        """A window starting after the stream time: apply_window_aggregates does not read it."""
        return position.stream_time_ms is not None and window_of(key)[1] > position.stream_time_ms

    def letters_written(
        self, records: list[Record], letters, limit: int, position: BatchPosition, max_future: int | None
    ) -> Iterator[Step]:
        yield from AggregateStreamJob.dead_letters_written(self, letters, position, max_future)


class WindowAggregateCacheTruth(OutsideForgiven, WindowAggregateTruth):
    """WindowAggregateTruth, but for the measures of windows changed from outside the stream."""

    def forgiven_lines(self, key: bytes) -> tuple[str, ...]:
        name, start = window_of(key)
        return (f"key {name.decode()!r} window {start} (",)


class WindowAggregateCacheProtocolMachine(CacheProtocolMachine, WindowAggregateProtocolMachine):
    """CacheProtocolMachine (its rules but produce, steady_batch and outside_the_stream) over a
    window aggregate store: WindowAggregateProtocolMachine's windowings, records and truth."""

    job_class: ClassVar[type[StreamJob]] = WindowAggregateCachedStreamJob
    faults_class: ClassVar[type[TaskFaults]] = AggregateCacheFaults

    def __init__(self) -> None:
        super().__init__()
        self.choose_windowing(0)  # again: over the CachedCassandra CacheProtocolMachine made

    @initialize(which=st.integers(0, len(WINDOWINGS) - 1))
    def choose_windowing(self, which: int) -> None:
        """The store's windowing (WINDOWINGS), its value the measures' accumulators, its rows the
        CachedCassandra's."""
        spec = replace(spec_of(WINDOWINGS[which]), value_codec=SPEC.value_format)
        self.model: dict[tuple[int, int], Any] = getattr(self, "model", {})
        cassandra = self.world.cassandra
        self.windows = WindowWorld(spec, CachedWindows(spec, cassandra))
        self.world.windows = self.windows
        self.truth = WindowAggregateCacheTruth(
            self.world.topic, windowing=spec.windowing, table=self.windows.table, model=self.model
        )
        self.truth.outside = cassandra

    produce = WindowAggregateProtocolMachine.produce
    steady_records = AggregateProtocolMachine.steady_records

    steady_batch = AggregateCacheProtocolMachine.steady_batch

    @precondition(lambda self: self.outside_events < OUTSIDE_EVENTS)
    @rule(key=st.sampled_from(KEYS), finishes=st.booleans(), ttl=st.sampled_from((False, False, None, *TTLS_S)))
    def outside_the_stream(self, key: Any, finishes: bool, ttl: bool | int | None) -> None:
        """CacheProtocolMachine.outside_the_stream, the expire job deleting `key`'s latest window
        (none when the store holds none of it)."""
        name = key_text(key).encode()
        held = sorted(start for start, rest in map(_start_first, self.world.cassandra.rows) if rest == name)
        start = held[-1] if held else 0
        self._outside(window_cache_key(name, start), finishes, ttl, f"{name.decode()!r} window {start}")


def _start_first(key: bytes) -> tuple[int, bytes]:
    name, start = window_of(key)
    return start, name
