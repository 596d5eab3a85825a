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
caller stopping the generator there.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from statestore.core.model import Entry
from statestore.core.retention import cutoff_ms
from statestore.store.book import deadletters
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
from tests.simulation.fake_cassandra import DeadLetterKey, FakeCassandra
from tests.simulation.fake_kafka import FakeTopic, Offsets, Record
from tests.simulation.fake_spark import CheckpointFolder, MicroBatch, SparkQuery, batch_read

# The simulated wall clock starts here (epoch ms, November 2023).
CLOCK_START_MS = 1_700_000_000_000


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

    @property
    def cassandra(self) -> FakeCassandra:
        return self.world.cassandra

    @property
    def topic(self) -> FakeTopic:
        return self.world.topic

    # --- start-up: statestore.stream.job.start ---

    def start(self, write_order: int = 0) -> Iterator[Step]:
        """job.start: the lease (one writer here: always free), the store's next epoch, the
        checks of job._check_checkpoint (with --recover-from-store, the store's pending batch
        finished first), then the query started on the checkpoint."""
        self.epoch = self.cassandra.take_epoch()  # registry.take_epoch
        yield Step("epoch", f"epoch {self.epoch} taken")
        starting = yield from self._check_checkpoint(write_order)
        self.query = SparkQuery(
            self.folder, self.topic, starting, self.settings.max_offsets_per_trigger, self.world.new_query_id()
        )
        yield Step("query", f"query {self.query.query_id} started on {self.folder.location}")

    def _check_checkpoint(self, write_order: int) -> Iterator[Step]:
        """job._check_checkpoint: refuse a topic created again and a checkpoint outside the store's
        history; record the topic's id; with --recover-from-store, finish the pending batch.
        Returns the query's starting offsets (None: --starting-offsets, earliest here)."""
        progress = self.cassandra.progress()
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
        stored = KafkaOffsets.parse_stored(self.cassandra.progress().offsets)
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
        progress = self.cassandra.progress()
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
        (position.recorded_done: nothing is written or recorded)."""
        progress = self.cassandra.progress()
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

    def apply_batch(self, records: list[Record], position: BatchPosition, write_order: int) -> Iterator[Step]:
        """Begun before any of the batch's writes, done after all of them: recording.begin, the
        counts (batch_apply._count: the replay-safe apply, then the dead letters if the batch had
        any), recording.done. The future limit is the batch's write timestamp plus the
        --max-future it began under (position.batch_rules; batch_apply._apply_batch)."""
        max_future = position.max_future_ms
        batch_id, write_ts = position.batch_id, position.write_ts
        limit = future_limit_ms(write_ts, max_future)
        self.cassandra.begin_batch(position, self.epoch)  # recording.begin -> registry.begin_batch
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
            self.cassandra.write_entry(entry, write_ts)
            what = f"batch {batch_id}: key {entry.key.decode()!r} written ({number} of {len(writes)})"
            yield Step("write", what, position, max_future)

        if uncountable:  # batch_apply._count -> dead_letters.write_dead_letters(dead_letter_rows)
            letters = [
                DeadLetterKey(record.partition, record.offset, reason)
                for record in records
                if (reason := dead_letter_reason(record, limit)) is not None
            ]
            for letter in letters:
                self.cassandra.write_dead_letter(letter, batch_id)
            yield Step("dead letters", f"batch {batch_id}: {len(letters)} dead letter(s) written", position, max_future)

        self.cassandra.record_batch(position, plan.max_time_ms, self.epoch)  # recording.done -> record_batch
        yield Step("record", f"batch {batch_id} recorded, ending at {position.end.as_json()}", position, max_future)
