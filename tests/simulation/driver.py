"""The stream job's driver, run against the fakes: start-up (statestore.stream.job.start and
_check_checkpoint, with --recover-from-store's batches.finish_pending_batch), the foreachBatch
function (batches.BatchApplier) and one batch's apply (batch_apply.apply_batch) of a key-value
store.

Every decision is the package's own pure function, called here: checkpoint.topic_problem,
checkpoint_problem and mismatch_error (the refusals), position.checked_batch_id (which calls
checkpoint.position_problem), position.recorded_done, write_ts_for, batch_rules, pending_position, naming_partitions,
position.stream_time_ms, checkpoint.starts_batch, StoreProgress.unfinished_batch, KafkaOffsets,
transforms.future_limit_ms and is_future_time (the future rule), tokenize.tokenize (the
words), retention.cutoff_ms and plan.plan_slice (the replay-safe rule of every key, `advance`
as arrays). What is tangled with Spark DataFrames or Cassandra sessions is mirrored, each with
a comment naming the real function.

Each effect on the outside world (a registry update, one key's write, the dead letters, a file
of the checkpoint) is yielded as a Step: the driver may crash after any of them, which is the
caller stopping the generator there, or pause there (a "zombie": the caller keeps the generator
and goes on with it later, after another writer took the store).

For the key-value kind (StreamJob.protocol_faults) the driver also holds the store's lease as
job.start and BatchApplier do (taken before the epoch, waited for when a crashed run of the
same checkpoint holds it, refused and retried once expired for another checkpoint, checked
before every batch: LeaseLostError), and runs each registry call as the job does, under
conn.retry.with_retries (the real is_transient decides what is retried; a timeout is a Step;
after RETRY_ATTEMPTS the run stops with CassandraUnavailableError, exit 2), `_check_checkpoint`
retried whole as job.start retries it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from cassandra import InvalidRequest

from statestore.conn.retry import is_transient, table_gone
from statestore.core.errors import CassandraUnavailableError, StoreFencedError
from statestore.core.model import Entry
from statestore.core.retention import cutoff_ms
from statestore.store.book import deadletters
from statestore.store.book.lease import LeaseHeldError, LeaseLostError, held_message
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.stream import checkpoint
from statestore.stream.apply import UNCOUNTABLE
from statestore.stream.plan import Delta, plan_slice, stored_record
from statestore.stream.position import (
    batch_rules,
    checked_batch_id,
    naming_partitions,
    partitions_of,
    pending_position,
    recorded_done,
    stream_time_ms,
    write_ts_for,
)
from statestore.stream.tokenize import tokenize
from statestore.stream.transforms import future_limit_ms, is_future_time
from tests.simulation.fake_cassandra import DeadLetterKey, FakeCassandra, LeaseRow
from tests.simulation.fake_kafka import FakeTopic, Offsets, Record
from tests.simulation.fake_spark import CheckpointFolder, MicroBatch, SparkQuery, batch_read

# The simulated wall clock starts here (epoch ms, November 2023).
CLOCK_START_MS = 1_700_000_000_000
LEASE_TTL_MS = 30_000  # --lease-ttl's default
# with_retries' attempts within its budget (--retry-budget): this many timeouts in a row stop the run.
RETRY_ATTEMPTS = 3


@dataclass(frozen=True)
class RunSettings:
    """The settings of one run of the job that the batch protocol depends on."""

    max_future_ms: int  # --max-future
    max_offsets_per_trigger: int | None  # --max-offsets-per-trigger (None: no limit)
    recover_from_store: bool = False  # --recover-from-store


@dataclass(frozen=True)
class Step:
    """One effect of the driver on the outside world, after which it may crash.
    `kind`: epoch, topic id, query, offsets, begin, write, dead letters, record, commit."""

    kind: str
    what: str
    position: BatchPosition | None = None
    max_future_ms: int | None = None  # the run's --max-future, for the steps of a batch


@dataclass
class World:
    """Everything outside the driver: the clock, the topic, Cassandra, the checkpoint in use."""

    topic: FakeTopic = field(default_factory=FakeTopic)
    cassandra: FakeCassandra = field(default_factory=FakeCassandra)
    checkpoint: CheckpointFolder = field(default_factory=lambda: CheckpointFolder("/checkpoints/cp-1"))
    clock_ms: int = CLOCK_START_MS
    checkpoints_made: int = 1
    queries_made: int = 0
    writers_made: int = 0

    def now_us(self) -> int:
        return self.clock_ms * 1000

    def new_checkpoint(self) -> CheckpointFolder:
        """A new, empty checkpoint folder, now the one in use."""
        self.checkpoints_made += 1
        self.checkpoint = CheckpointFolder(f"/checkpoints/cp-{self.checkpoints_made}")
        return self.checkpoint

    def new_query_id(self) -> str:
        self.queries_made += 1
        return f"query-{self.queries_made}"

    def new_holder(self) -> str:
        """lease.describe_self: a name unique per process start."""
        self.writers_made += 1
        return f"writer-{self.writers_made}"


def dead_letter_reason(record: Record, limit_ms: int | None) -> str | None:
    """transforms.dead_letter_rows' reason for a record that cannot be counted at all (None: it
    can): no value, or a time after its batch's future limit (transforms.is_future_time)."""
    if record.value is None:
        return deadletters.NULL_VALUE
    if is_future_time(record.time_ms, limit_ms):
        return deadletters.FUTURE
    return None


def batch_deltas(records: list[Record], limit_ms: int | None) -> tuple[list[Delta], int]:
    """transforms.batch_deltas(with_uncountable=True), then apply.applied's split: the batch's
    deltas (word, how often, latest time) in word order, and how many rows fell under
    apply.UNCOUNTABLE (one per record that cannot be counted). Words over the key limit (also
    UNCOUNTABLE, dead letters `key_too_long`) are not modelled: the simulated words are short."""
    counts: dict[str, list[int]] = {}
    for record in records:
        words = [UNCOUNTABLE] if dead_letter_reason(record, limit_ms) else tokenize(record.value or "")
        for word in words:
            count = counts.setdefault(word, [0, record.time_ms])
            count[0] += 1
            count[1] = max(count[1], record.time_ms)
    uncountable = counts.pop(UNCOUNTABLE, [0])[0]
    deltas = [Delta(word.encode(), amount, last) for word, (amount, last) in sorted(counts.items())]
    return deltas, uncountable


class StreamJob:
    """One run of the job with `settings` on the world's checkpoint in use (see the module doc).
    Start it with `start()`; then each `trigger()` runs the query's next micro-batch, if any."""

    def __init__(self, world: World, settings: RunSettings) -> None:
        self.world = world
        self.settings = settings
        self.folder = world.checkpoint
        self.query: SparkQuery | None = None
        self.epoch: int | None = None
        self.holder = world.new_holder()
        self.generation = world.cassandra.table_generation  # the table the run resolved

    @classmethod
    def protocol_faults(cls) -> bool:
        """Whether the lease, paused drivers and registry timeouts are modelled: for the key-value
        apply (this class's apply_batch, whose registry calls go through `_retried`)."""
        return cls.apply_batch is StreamJob.apply_batch

    @property
    def cassandra(self) -> FakeCassandra:
        return self.world.cassandra

    @property
    def topic(self) -> FakeTopic:
        return self.world.topic

    # --- start-up: statestore.stream.job.start ---

    def start(self, write_order: int = 0) -> Iterator[Step]:
        """job.start: the lease, the store's next epoch, the checks of job._check_checkpoint
        (with --recover-from-store, the store's pending batch finished first; retried whole),
        then the query started on the checkpoint."""
        if self.protocol_faults():
            self.cassandra.provision()  # job.resolve_store -> provision (before the lease)
            self.generation = self.cassandra.table_generation
            self._take_lease()
        self.epoch = yield from self._retried("taking the store's epoch", self.cassandra.take_epoch)
        if self.protocol_faults():  # job.start_query resolves the store again once the epoch is its
            self.generation = self.cassandra.table_generation
        # job._fence_taken_over_batch: a batch an earlier writer began, recorded as fenced.
        pending = self.cassandra.progress().unfinished_batch
        if pending is not None:
            epoch = self.epoch
            yield from self._retried(
                "recording the batch taken over", lambda: self.cassandra.record_fenced_batch(pending, epoch)
            )
        yield Step("epoch", f"epoch {self.epoch} taken")
        starting = yield from self._retried_steps(
            "checking the checkpoint", lambda: self._check_checkpoint(write_order)
        )
        self.query = SparkQuery(
            self.folder, self.topic, starting, self.settings.max_offsets_per_trigger, self.world.new_query_id()
        )
        yield Step("query", f"query {self.query.query_id} started on {self.folder.location}")

    # --- the lease (statestore.store.book.lease.StoreLease) and with_retries ---

    def _take_lease(self) -> None:
        """StoreLease.acquire: free, or expired, it is taken; held by a run of the same checkpoint
        (crashed: it no longer renews) it is waited for; held for another checkpoint, the start
        is refused (LeaseHeldError, exit 2), and its way out, a restart once the lease expired,
        is taken here. A holder that still renews is never found here (one job runs at a time;
        a paused one stopped renewing), but a reset's lease, which has no TTL, is: LeaseHeldError,
        whose way out (a reset run again with --writer-stopped) the machine takes."""
        now = self.world.clock_ms
        held = self.cassandra.live_lease(now)
        if held is not None:
            if held.expires_ms is None:  # a reset's lease (durable), paused or killed: lease.held_message
                raise LeaseHeldError(held_message(self.cassandra.store, held.holder, held.checkpoint, None))
            self.world.clock_ms = held.expires_ms  # waited (same checkpoint), or refused and restarted then
            self.cassandra.live_lease(self.world.clock_ms)
        self.cassandra.lease = LeaseRow(self.holder, self.folder.location)

    def check_lease(self) -> None:
        """StoreLease.check, before each batch: LeaseLostError once the lease expired or was taken
        (a renewal, `IF holder = ?`, is then refused)."""
        held = self.cassandra.live_lease(self.world.clock_ms)
        if held is None or held.holder != self.holder:
            taken = "expired" if held is None else f"was taken by {held.holder}"
            raise LeaseLostError(f"store '{self.cassandra.store}': the lease {taken}; this query stops writing")

    def stop_renewing(self) -> None:
        """The driver crashed or paused: its lease lives one TTL more."""
        held = self.cassandra.lease
        if held is not None and held.holder == self.holder and held.expires_ms is None:
            held.expires_ms = self.world.clock_ms + LEASE_TTL_MS

    def release_lease(self) -> None:
        """RunningStream.stop / job.start's failure: StoreLease.release (`IF holder = ?`)."""
        if self.cassandra.lease is not None and self.cassandra.lease.holder == self.holder:
            self.cassandra.lease = None

    def _write_entry(self, entry: Entry, write_ts: int) -> None:
        """One key's write to the table the run resolved, under with_retries: a table gone is
        StoreFencedError (conn.retry.table_gone)."""
        try:
            self.cassandra.write_entry(entry, write_ts, self.generation)
        except InvalidRequest as exc:
            if table_gone(exc):
                raise StoreFencedError(f"writing batch entries failed: its table is gone ({exc})") from exc
            raise

    def _retried(self, what: str, action):
        """conn.retry.with_retries over `action`: a transient error (is_transient: a timeout, an
        unknown transaction outcome) is a Step and the action runs again; RETRY_ATTEMPTS of them
        stop the run (CassandraUnavailableError). Returns the action's result."""
        return (yield from self._retried_steps(what, lambda: _no_steps(action)))

    def _retried_steps(self, what: str, steps):
        """`_retried` over an action that has steps of its own (`steps()` makes them anew)."""
        for attempt in range(1, RETRY_ATTEMPTS + 1):
            try:
                return (yield from steps())
            except Exception as exc:  # only what is_transient names is retried, as with_retries does
                if not is_transient(exc):
                    raise
                if attempt == RETRY_ATTEMPTS:
                    raise CassandraUnavailableError(f"{what} failed ({attempt} attempts): {exc}") from None
                yield Step("timeout", f"{what}: {type(exc).__name__}: {exc}; retrying")
        raise AssertionError("unreachable")

    def _check_checkpoint(self, write_order: int) -> Iterator[Step]:
        """job._check_checkpoint: refuse a topic created again and a checkpoint outside the store's
        history; record the topic's id; with --recover-from-store, finish the pending batch.
        Returns the query's starting offsets (None: --starting-offsets, earliest here)."""
        progress = self.cassandra.serial_progress()
        topic_id = self._checked_topic_id(progress)
        if topic_id is not None and topic_id != progress.topic_id:
            self.cassandra.record_topic_id(topic_id, self.epoch)  # registry.record_topic_id
            yield Step("topic id", f"topic id {topic_id} recorded")
        owner = self.folder.owner()  # checkpoint.owner
        committed = owner is not None and self.folder.committed_batches()
        problem = checkpoint.checkpoint_problem(progress, owner, self.settings.recover_from_store, committed)
        if problem:
            way_out = None if progress.has_batches else checkpoint.START_OVER
            raise checkpoint.mismatch_error(self.cassandra.store, self.folder.location, problem, way_out)
        if owner is None and progress.has_batches:  # only reached with --recover-from-store
            yield from self.finish_pending_batch(write_order)
            return self._recovery_start()
        return None

    def _recovery_start(self) -> Offsets | None:
        """job._recovery_start: the store's position, naming every partition the topic has now
        (None: the store recorded none; --starting-offsets, earliest here)."""
        stored = KafkaOffsets.parse_stored(self.cassandra.serial_progress().offsets)
        if stored is None:
            return None
        return self.topic.of(naming_partitions(stored, {self.topic.name: range(self.topic.partition_count)}))

    def _checked_topic_id(self, progress) -> str | None:
        """position.SourceTopic.checked_id: the topic's id, once checkpoint.topic_problem passes."""
        problem = checkpoint.topic_problem(progress, self.topic.name, self.topic.topic_id)
        if problem is not None:
            way_out = checkpoint.NEW_TOPIC.format(store=self.cassandra.store)
            raise checkpoint.mismatch_error(self.cassandra.store, self.folder.location, problem, way_out)
        return self.topic.topic_id

    def finish_pending_batch(self, write_order: int) -> Iterator[Step]:
        """batches.finish_pending_batch: the store's pending batch applied again from the
        offsets it recorded (a batch read of Kafka from its start to its end)."""
        progress = self.cassandra.serial_progress()
        pending = progress.unfinished_batch
        if pending is None:
            return
        if progress.pending_offsets is None:
            raise checkpoint.mismatch_error(
                self.cassandra.store, "(unknown)", f"batch {pending} has no recorded offsets to finish it from"
            )
        position = pending_position(progress, self.settings.max_future_ms)
        assigned = partitions_of(position.end)  # finish_pending_batch's `assign`
        start = naming_partitions(position.start, assigned)
        records = batch_read(
            self.topic, set(assigned[self.topic.name]), self.topic.of(start), self.topic.of(position.end)
        )
        yield from self.apply_batch(records, position, write_order)

    # --- a micro-batch: Spark's trigger, then batches.BatchApplier.__call__ ---

    def trigger(self, write_order: int = 0) -> Iterator[Step]:
        """One trigger of the query: the batch Spark plans (or runs again), its foreachBatch,
        then commits/N. Nothing when there are no new records."""
        batch = self.query.next_batch()
        if batch is None:
            return
        if not batch.rerun:
            yield Step("offsets", f"offsets/{batch.spark_batch_id} written: {batch.start} -> {batch.end}")
        yield from self.foreach_batch(batch, write_order)
        self.query.commit(batch.spark_batch_id)
        yield Step("commit", f"commits/{batch.spark_batch_id} written")

    def foreach_batch(self, batch: MicroBatch, write_order: int) -> Iterator[Step]:
        """BatchApplier.__call__: the store's progress (_checked_progress), the batch's position
        (_position), then apply_batch, unless the store recorded the batch as done already
        (position.recorded_done: nothing is written or recorded). The lease checked first."""
        if self.protocol_faults():
            self.check_lease()
        progress = self.cassandra.serial_progress()
        self._checked_topic_id(progress)
        spark_batch_id = batch.spark_batch_id
        end = self.folder.end_offsets(self.topic, spark_batch_id)
        batch_id, base = checked_batch_id(
            progress, spark_batch_id, end, self.query.query_id, self.cassandra.store, self.folder.location
        )
        start = KafkaOffsets.parse_stored(progress.offsets) or self._first_start(batch, end)
        rules = batch_rules(progress, batch_id, self.settings.max_future_ms)
        position = BatchPosition(
            batch_id=batch_id,
            write_ts=write_ts_for(progress, batch_id, self.world.now_us()),
            start=start,
            end=end,
            query_id=self.query.query_id,
            batch_base=base,
            spark_batch_id=spark_batch_id,
            stream_time_ms=stream_time_ms(progress),
            retention_ms=rules.retention_ms,
            max_future_ms=rules.max_future_ms,
        )
        if recorded_done(progress, position.batch_id):
            return  # BatchApplier._already_done: logged, applied nowhere
        yield from self.apply_batch(list(batch.records), position, write_order)

    def _first_start(self, batch: MicroBatch, end: KafkaOffsets) -> KafkaOffsets:
        """position.first_start: the checkpoint's starting offsets for its batch 0 when they fit
        its end (checkpoint.starts_batch), else position.first_batch_start: per partition its
        lowest offset in the batch, or its end where the batch read nothing."""
        known = self.folder.initial_offsets(self.topic) if batch.spark_batch_id == 0 else None
        if known is not None and checkpoint.starts_batch(known, end):
            return known
        start: Offsets = self.topic.of(end)
        for record in batch.records:
            start[record.partition] = min(start[record.partition], record.offset)
        return self.topic.offsets(start)

    # --- one batch's apply: statestore.stream.batch_apply._apply_batch ---

    def write_dead_letters(
        self, records: list[Record], limit: int, position: BatchPosition, max_future: int | None
    ) -> Iterator[Step]:
        """batch_apply._count -> dead_letters.write_dead_letters(dead_letter_rows): the batch's
        uncountable records, each at the batch's write timestamp (a reset's floor shadows a paused
        writer's)."""
        letters = [
            DeadLetterKey(record.partition, record.offset, reason)
            for record in records
            if (reason := dead_letter_reason(record, limit)) is not None
        ]
        for letter in letters:
            self.cassandra.write_dead_letter(letter, position.batch_id, position.write_ts)
        yield Step(
            "dead letters", f"batch {position.batch_id}: {len(letters)} dead letter(s) written", position, max_future
        )

    def apply_batch(self, records: list[Record], position: BatchPosition, write_order: int) -> Iterator[Step]:
        """Begun before any of the batch's writes, done after all of them: recording.begin, the
        counts (batch_apply._count: the replay-safe apply, then the dead letters if the batch had
        any), recording.done. The future limit is the batch's write timestamp plus the
        --max-future it began under (position.batch_rules; batch_apply._apply_batch)."""
        max_future = position.max_future_ms
        batch_id, write_ts = position.batch_id, position.write_ts
        limit = future_limit_ms(write_ts, max_future)
        # recording.begin -> registry.begin_batch, under with_retries (writer.step)
        yield from self._retried("registry begin_batch", lambda: self.cassandra.begin_batch(position, self.epoch))
        yield Step("begin", f"batch {batch_id} begun (write_ts {write_ts}, limit {limit})", position, max_future)

        deltas, uncountable = batch_deltas(records, limit)
        # apply.apply_deltas (no apply cache): read the keys' entries, plan the slice, write.
        current = self.cassandra.read_entries([d.key for d in deltas])
        stored = [None if (entry := current.get(d.key)) is None else stored_record(entry) for d in deltas]
        plan = plan_slice(stored, deltas, batch_id, cutoff_ms(position.retention_ms, position.stream_time_ms))
        writes: list[Entry] = list(plan.writes)
        # The writes of a slice go out concurrently (execute_concurrent): they land in any order.
        if write_order:
            random.Random(write_order).shuffle(writes)
        for number, entry in enumerate(writes, 1):
            self._write_entry(entry, write_ts)
            what = f"batch {batch_id}: key {entry.key.decode()!r} written ({number} of {len(writes)})"
            yield Step("write", what, position, max_future)

        if uncountable:
            yield from self.write_dead_letters(records, limit, position, max_future)

        # recording.done -> registry.record_batch, under with_retries (writer.step)
        record = lambda: self.cassandra.record_batch(position, plan.max_time_ms, self.epoch)  # noqa: E731
        yield from self._retried("registry record_batch", record)
        yield Step("record", f"batch {batch_id} recorded, ending at {position.end.as_json()}", position, max_future)


def _no_steps(action):
    """`action` as a generator of no steps (for StreamJob._retried)."""
    return action()
    yield  # pragma: no cover - makes this a generator
