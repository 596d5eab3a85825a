"""The apply cache for aggregate stores in the simulator (issues 45 and 47): the cache kind's run
(cache.py: the cache on or off per run, its buckets, local mode or a cluster, the driver's own
apply, task attempts placed on executors and dying after some landings, the expire job's marks
and deletes, table TTLs set and removed between batches or during one, and the vouching check)
with the aggregate kind's JSON records, measures and truth (aggregates.py: SPEC, produced,
aggregate_batch, AggregateTruth), each task attempt's slice applied through the real
statestore.stream.aggregates.apply_aggregates with its bucket's file (cache=) and a table over
the fake Cassandra (table=), as cache.py drives apply._apply_cached.

The invariant, besides the truth's: whatever a file vouches for of a key (its record, as an
entry, or the key's absence from a complete file) plans with plan_aggregates as the store's row
of the key at that moment plans (CacheVouchedWrong). Keys the expire job deleted, or whose rows
expired under a table TTL, leave the truth of measures (it knows nothing of expiry), never the
vouching check. Runs without the cache apply as the aggregate kind does, with one task
(no speculative attempts here: aggregates.py has them).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from statestore.core.aggregation import plan_aggregates
from statestore.core.model import Entry
from statestore.store.book.registry import BatchPosition
from statestore.stream.aggregates import apply_aggregates
from statestore.stream.apply import ApplyStats
from statestore.stream.plan import entry_of
from tests.simulation.aggregates import (
    AMOUNTS,
    KEYS,
    QTYS,
    SPEC,
    USERS,
    AggregateProtocolMachine,
    AggregateStreamJob,
    AggregateTruth,
    aggregate_batch,
    key_text,
)
from tests.simulation.cache import (
    OUTSIDE_EVENTS,
    TTLS_S,
    CachedCassandra,
    CachedStreamJob,
    CacheProtocolMachine,
    OutsideForgiven,
    TaskFaults,
)
from tests.simulation.driver import Step, StreamJob
from tests.simulation.fake_kafka import Record


@dataclass(frozen=True)
class AggregateCacheFaults(TaskFaults):
    """cache.TaskFaults, which the cached apply takes; a run without the cache applies as the
    aggregate kind does (AggregateStreamJob), with one task and no speculative attempt."""

    tasks: int = 1
    speculative: tuple[bool, int] | None = None


class AggregateVouching:
    """A cached stream job's vouching check for an aggregate store (see the module doc), whose
    rows are the CachedCassandra's by their cache key (a window store's too: window_aggregate_cache)."""

    cassandra: CachedCassandra

    def vouched_wrong(self, key: bytes, found: bytes | None, delta, batch_id: int, cutoff: int | None) -> str | None:
        """The file's record as an entry (None: absent) against the store's row now: equal, or
        planned to the same entry (written, or kept as it is)."""
        self.cassandra.purge()
        row = self.cassandra.rows.get(key)
        held = None if row is None else row.entry
        vouched = None if found is None else entry_of(key, found)
        if vouched == held:
            return None

        def after(entry: Entry | None) -> Entry | None:
            writes, _ = plan_aggregates(SPEC, {} if entry is None else {key: entry}, [delta], batch_id, cutoff)
            return writes[0] if writes else entry

        if after(vouched) == after(held):
            return None
        return f"the file vouched for {self.shown_key(key)} as {_shown(vouched)}, the store holds {_shown(held)}"


class AggregateCachedStreamJob(AggregateVouching, CachedStreamJob, AggregateStreamJob):
    """CachedStreamJob whose batches are aggregated: without a cache plan (the cache off, a
    recovery, a batch the ledger does not admit) AggregateStreamJob's apply; with one, each
    bucket's task attempts through apply_aggregates with their file."""

    faults: TaskFaults = AggregateCacheFaults()

    def cached_batch_of(
        self, records: list[Record], limit_ms: int | None, position: BatchPosition
    ) -> tuple[list, object]:
        return aggregate_batch(records, limit_ms)

    def apply_cached(self, table, group: list, position: BatchPosition, opened, cutoff: int | None) -> ApplyStats:
        batch_id, write_ts = position.batch_id, position.write_ts
        return apply_aggregates(None, None, SPEC, batch_id, group, 1, write_ts, None, cutoff, cache=opened, table=table)

    def letters_written(
        self, records: list[Record], letters, limit: int, position: BatchPosition, max_future: int | None
    ) -> Iterator[Step]:
        yield from self.dead_letters_written(letters, position, max_future)


def _shown(entry: Entry | None) -> str:
    if entry is None:
        return "absent"
    return f"({SPEC.finish(SPEC.unpack(entry.value))}, batch {entry.batch_id}, time {entry.time_ms})"


class AggregateCacheTruth(OutsideForgiven, AggregateTruth):
    """AggregateTruth, but for the measures of keys changed from outside the stream."""


class AggregateCacheProtocolMachine(CacheProtocolMachine, AggregateProtocolMachine):
    """CacheProtocolMachine (its rules but produce and steady_batch) over an aggregate store:
    AggregateProtocolMachine's records and truth."""

    job_class: ClassVar[type[StreamJob]] = AggregateCachedStreamJob
    faults_class: ClassVar[type[TaskFaults]] = AggregateCacheFaults

    def __init__(self) -> None:
        super().__init__()
        self.truth = AggregateCacheTruth(self.world.topic, model=self.model)
        self.truth.outside = self.world.cassandra

    produce = AggregateProtocolMachine.produce

    @precondition(lambda self: self.job is not None)
    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3), qty=st.sampled_from(QTYS),
          amount=st.sampled_from(AMOUNTS), user=st.sampled_from(USERS), seed=st.integers(0, 7))  # fmt: skip
    def steady_batch(self, keys: list[Any], qty: int, amount: float, user: Any, seed: int) -> None:
        """A second later a good record of each of `keys`, and the batch that reads them,
        nothing failing, its tasks placed by `seed`: the runs of batches in which files are trusted."""
        self.steady_records(keys, qty, amount, user)
        self.job.faults = self.faults_class(seed)
        self._run(self.job.trigger(0), None)

    @precondition(lambda self: self.outside_events < OUTSIDE_EVENTS)
    @rule(key=st.sampled_from(KEYS), finishes=st.booleans(), ttl=st.sampled_from((False, False, None, *TTLS_S)))
    def outside_the_stream(self, key: Any, finishes: bool, ttl: bool | int | None) -> None:
        """CacheProtocolMachine.outside_the_stream, the expire job deleting an aggregate key."""
        self._outside(key_text(key).encode(), finishes, ttl)
