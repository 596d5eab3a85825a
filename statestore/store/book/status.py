"""How a store's stream is doing, from what outlives its driver: the registry (position), the
lease (who writes), the stream log (states and batches) and, for the lag, the end offsets of its
topic, read by the caller's `EndOffsets` (statestore.conn.kafka.end_offsets_source).

The rule: one home for what `statestore status`, the metrics and the store page report. The pure
parts (lag, rate, the last hour's dead letters, which state is the store's) are functions of those
facts; `stream_status` gathers the facts, and reads no Kafka itself.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from statestore.core.codecs import millis_of
from statestore.core.errors import KafkaError
from statestore.store.book import registry, stream_log
from statestore.store.book.lease import current_holder
from statestore.store.book.registry import StoreProgress
from statestore.store.book.stream_log import BatchRecord, StateChange, Totals

RATE_BATCHES = 20  # words/s over this many recent batches
STATE_ROWS = 100  # state changes read to find the writer's run among refused runs' rows
HOUR_MS = 3_600_000
# A topic's end offset per partition now (None: no such topic); raises KafkaError when Kafka does
# not answer. The status asks it for the store's source topic only.
EndOffsets = Callable[[str], dict[int, int] | None]


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    end_offset: int
    position: int | None  # the store's next offset to read (None: nothing applied from it yet)
    lag: int


@dataclass(frozen=True)
class StreamStatus:
    store: str
    keyspace: str
    store_type: str
    state: str | None  # the writer's run's latest state (store_state; None: no stream has run with the stream log)
    state_since_ms: int | None
    state_reason: str | None
    writer: str | None  # the lease holder, host:pid:id (None: no driver writes the store)
    writer_since_ms: int | None
    last_batch_id: int | None
    last_batch_at_ms: int | None
    last_batch_age_s: float | None
    lag: list[PartitionLag] = field(default_factory=list)
    lag_total: int | None = None  # None: Kafka not asked or the topic is gone
    words_per_s: float | None = None
    rate_batches: int = 0
    dead_letters_last_hour: int = 0
    last_restart_s: float | None = None
    last_restart_at_ms: int | None = None
    max_event_time_ms: int | None = None
    totals: Totals = field(default_factory=Totals)  # running sums up to the last logged batch
    batch_seconds: tuple[float, ...] = ()  # durations of the recent batches, newest first
    kafka_error: str | None = None  # why the lag is left out, when Kafka did not answer (lenient)

    @property
    def writer_up(self) -> bool:
        return self.writer is not None

    def as_dict(self) -> dict:
        return {**asdict(self), "writer_up": self.writer_up}


def lag_of(topic: str, end_offsets: dict[int, int], position: str | None) -> list[PartitionLag]:
    """Per partition: its end offset minus the store's position (Spark's JSON of offsets);
    a partition the store has not read from lags by its whole end offset. Pure."""
    read = {int(p): o for p, o in (json.loads(position).get(topic, {}) if position else {}).items()}
    return [
        PartitionLag(topic, p, end, read.get(p), max(0, end - read.get(p, 0))) for p, end in sorted(end_offsets.items())
    ]


def rate_window(batches: list[BatchRecord]) -> list[BatchRecord]:
    """The batches (newest first) the rate is measured over: the newest run's. Runs that stop
    when the topic is read (available-now: make run, the DAG) are minutes apart, and the time
    between them is no throughput. Pure."""
    if not batches:
        return []
    run = batches[0].run_id
    return list(itertools.takewhile(lambda b: b.run_id == run, batches))


def words_per_second(batches: list[BatchRecord]) -> float | None:
    """Words counted per second over `batches` (newest first): the words of all but the oldest
    over the time from the oldest's commit to the newest's; one batch: its words over its own
    duration. Pure."""
    timed = [b for b in batches if b.recorded_at_ms is not None]
    if len(timed) >= 2 and timed[0].recorded_at_ms > timed[-1].recorded_at_ms:
        span_s = (timed[0].recorded_at_ms - timed[-1].recorded_at_ms) / 1000
        return round(sum(b.words for b in timed[:-1]) / span_s, 1)
    if timed and timed[0].seconds > 0:
        return round(timed[0].words / timed[0].seconds, 1)
    return None


def last_recorded_before(
    newest: BatchRecord, since_ms: int, at_or_before: Callable[[int], BatchRecord | None]
) -> BatchRecord | None:
    """The newest batch recorded before `since_ms` (None: every logged batch is that recent),
    found by bisecting batch ids, since a store records its batches in id order:
    `at_or_before(id)` gives the newest logged batch with an id at most `id`, and about
    log2(batches) of them are asked. Pure but for that probe."""
    if newest.recorded_at_ms is None or newest.recorded_at_ms < since_ms:
        return newest
    # Invariant: every logged batch with an id at most `low` was recorded before since_ms, and
    # `found` is the newest of them; every one from `high` on was recorded at or after it.
    low, high, found = -1, newest.batch_id, None
    while high - low > 1:
        middle = (low + high) // 2
        probe = at_or_before(middle)
        if probe is None:
            low = middle
        elif probe.recorded_at_ms is None or probe.recorded_at_ms < since_ms:
            low, found = middle, probe
        else:
            high = probe.batch_id
    return found


def dead_letters_between(newest: BatchRecord, before: BatchRecord | None) -> int:
    """Dead letters of the batches after `before` up to `newest`, from their running sums
    (`before` None: every batch up to `newest`). Pure."""
    earlier = 0 if before is None else sum(n for _, n in before.totals.dead_letters)
    return sum(n for _, n in newest.totals.dead_letters) - earlier


def last_restart(states: list[StateChange]) -> StateChange | None:
    """The newest state change that recorded a restart time (a run's first committed batch)."""
    return next((s for s in states if s.restart_seconds is not None), None)


def store_state(states: list[StateChange], holder: str | None) -> StateChange | None:
    """Which of the state changes (newest first) is the store's state: the newest of the lease
    holder's run, when it recorded any; else the newest of a run that was not refused at the
    lease (a refused run never wrote the store, so its rows say nothing about it); else, when
    every run was refused, the newest change. Rows of an older release (no writer) count as
    their own run. Pure."""
    if holder is not None:
        own = next((s for s in states if s.writer == holder), None)
        if own is not None:
            return own
    refused = {s.writer for s in states if s.state == stream_log.REFUSED and s.writer is not None}
    kept = (s for s in states if s.state != stream_log.REFUSED and (s.writer is None or s.writer not in refused))
    return next(kept, states[0] if states else None)


def stream_status(
    session,
    end_offsets: EndOffsets | None,
    keyspace: str,
    store: str,
    now_ms: int | None = None,
    lenient: bool = False,
):
    """The status of `store`'s stream now; `end_offsets` None leaves the lag out. A Kafka that
    does not answer raises KafkaError, or with `lenient` leaves the lag out and says why."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    spec = registry.lookup(session, keyspace, store)
    progress = registry.progress(session, keyspace, store)
    holder = current_holder(session, keyspace, store)
    states = stream_log.recent_states(session, keyspace, store, STATE_ROWS)
    batches = stream_log.recent_batches(session, keyspace, store, RATE_BATCHES)
    letters = 0
    if batches:
        hour_ago = last_recorded_before(
            batches[0],
            now_ms - HOUR_MS,
            lambda batch_id: stream_log.batch_at_or_before(session, keyspace, store, batch_id),
        )
        letters = dead_letters_between(batches[0], hour_ago)
    latest = store_state(states, None if holder is None else holder.holder)
    restart = last_restart(states)
    rated = rate_window(batches)
    lag, total, kafka_error = _lag(progress, end_offsets, lenient)
    last_at = None if progress.last_batch_at is None else millis_of(progress.last_batch_at)
    return StreamStatus(
        store=spec.name,
        keyspace=keyspace,
        store_type=spec.store_type.value,
        state=None if latest is None else latest.state,
        state_since_ms=None if latest is None else latest.at_ms,
        state_reason=None if latest is None else latest.reason,
        writer=None if holder is None else holder.holder,
        writer_since_ms=None if holder is None or holder.acquired_at is None else millis_of(holder.acquired_at),
        last_batch_id=progress.last_batch_id,
        last_batch_at_ms=last_at,
        last_batch_age_s=None if last_at is None else round((now_ms - last_at) / 1000, 1),
        lag=lag,
        lag_total=total,
        words_per_s=words_per_second(rated),
        rate_batches=len(rated),
        dead_letters_last_hour=letters,
        last_restart_s=None if restart is None else restart.restart_seconds,
        last_restart_at_ms=None if restart is None else restart.at_ms,
        max_event_time_ms=None if progress.max_event_time is None else millis_of(progress.max_event_time),
        totals=batches[0].totals if batches else Totals(),
        batch_seconds=tuple(b.seconds for b in batches),
        kafka_error=kafka_error,
    )


def _lag(
    progress: StoreProgress, end_offsets: EndOffsets | None, lenient: bool
) -> tuple[list[PartitionLag], int | None, str | None]:
    """(lag per partition, their total, why Kafka did not answer) of the store's source topic;
    ([], None, None) without `end_offsets` or a topic, and when the topic is gone."""
    topic = progress.source_topic
    if end_offsets is None or not topic:
        return [], None, None
    try:
        ends = end_offsets(topic)
    except KafkaError as exc:
        if not lenient:
            raise
        return [], None, str(exc)
    if ends is None:
        return [], None, None
    lag = lag_of(topic, ends, progress.offsets)
    return lag, sum(p.lag for p in lag), None
