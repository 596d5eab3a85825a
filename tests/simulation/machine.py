"""The Hypothesis state machine that composes the events of the batch protocol: records
produced (some without a value, some far in the future) as the clock moves, partitions added,
the job started and restarted with other settings, micro-batches run, the driver crashing after
any step of one, checkpoint backups taken (even mid-batch) and restored, the checkpoint lost,
`--recover-from-store` with a new checkpoint; Kafka transactions, the topic created again and a
driver paused during its start-up (kafka_events.KafkaEvents). The invariant (truth.Truth) is
checked after every step of the driver, not only after every event.

For the key-value kind, also: more than one writer (a driver paused after any step of a batch
for longer than the lease TTL, a "zombie", that goes on later, after another run may have taken
the lease and the next epoch and run batches: its registry updates are refused, its entry
writes are not fenced and land with its batch's write timestamp), and registry transactions
that time out applied, not applied, or accepted and committed by the next Paxos round, three in
a row stopping the run (CassandraUnavailableError, exit 2: its way out is a restart); the
operator's `statestore reset` between runs (then the old checkpoint, refused once it committed a
batch, or a new one), a reset paused between its last epoch check and its TRUNCATE for longer
than any lease TTL, which goes on later or is killed (a start meanwhile is refused by the
reset's lease, which has no TTL, until the reset finished or a reset run again with
--writer-stopped took it over), and the store's table dropped by hand (the start refuses,
StoreTableLostError, until the reset, its way out; the store is not compared while its table is
gone).

A refusal (CheckpointMismatchError) stops the job; the operator's only events then are the
refusal's documented ways out (restore the checkpoint that was replaced, or a new checkpoint
with --recover-from-store; records keep arriving meanwhile), and the invariant must hold
through them. A failure of Spark's that no way out documents (WayOutFailed) fails the run.

Known bugs, until fixed, can be left out by event (KNOWN_BUGS): a subclass made by
`machine_excluding` never takes the events that reach them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from statestore.core.errors import (
    CassandraUnavailableError,
    CheckpointMismatchError,
    StoreFencedError,
    StoreTableLostError,
)
from statestore.store import admin
from statestore.store.book.lease import RESET_CHECKPOINT, LeaseHeldError, LeaseLostError, held_message
from tests.simulation.driver import LEASE_TTL_MS, RunSettings, Step, StreamJob, World
from tests.simulation.fake_cassandra import LWT_APPLIED, LWT_LATE, LWT_LOST, LeaseRow, ResetTicket
from tests.simulation.fake_spark import CheckpointFolder, SparkAssertionError
from tests.simulation.kafka_events import PAUSE, KafkaEvents
from tests.simulation.operator_events import OperatorEvents
from tests.simulation.truth import Truth

# The known bugs (issue 45's item number, or a name for one the simulator found) and what
# leaving out the events that reach each means. A bug's entry goes once it is fixed.
KNOWN_BUGS: dict[str, str] = {}

WORDS = ("a", "b", "c", "B")
MAX_PARTITIONS = 3
MAX_FUTURE_MS = (1_000, 60_000, 300_000)
AHEAD_MS = (0, 0, 30_000, 120_000, 900_000)  # a record's time ahead of the clock when produced
AFTER_MS = (0, 0, 1_000, 100_000, 1_000_000)  # how far the clock moves before a record is produced
RETENTIONS_MS = (None, 60_000, 600_000)  # set-retention's choices
STEP_INDEX = st.none() | st.integers(0, 8)  # crash (or back up) after this step of the driver, or never


class InvariantBroken(AssertionError):
    """The store differs from the truth of the input its recorded batches cover."""


class CountsWrong(InvariantBroken):
    """A key's count (or time) differs from the truth, or the store claims input it never read."""


class DeadLetterMissing(InvariantBroken):
    """The counts are right, but a record that was not counted is not a dead letter either: it
    is lost. (Each kind of difference is its own error, so Hypothesis reports and shrinks each
    apart.)"""


class DeadLetterUnexpected(InvariantBroken):
    """The counts are right, but the store holds a dead letter of a record it counted, or of one
    no batch it knows of read."""


class WayOutFailed(AssertionError):
    """The job failed with no refusal of ours and no documented way out (Spark refused to start)."""


class BatchProtocolMachine(OperatorEvents, KafkaEvents, RuleBasedStateMachine):
    """The batch protocol of one key-value store's stream (see the module doc)."""

    excluded: ClassVar[frozenset[str]] = frozenset()
    job_class: ClassVar[type[StreamJob]] = StreamJob  # the driver of the store kind (sessions.SessionStreamJob)
    # runner.seed_digest's: called with the machine after every event and at its end (teardown).
    traced: ClassVar[Callable[[BatchProtocolMachine, bool], None] | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.truth = Truth(self.world.topic)
        self.settings = RunSettings(max_future_ms=300_000, max_offsets_per_trigger=None)
        self.job: StreamJob | None = None
        self.refusal: str | None = None
        self.backups: list[CheckpointFolder] = []
        self.replaced: CheckpointFolder | None = None  # the checkpoint an operator replaced last
        self.steps: list[str] = []  # what the driver did in the current event
        self.spark_failed_at: int | None = None  # the topic's partitions when Spark's query last failed
        # A paused driver (its job and the rest of its steps), once its pause outlived its lease.
        self.zombie: tuple[StreamJob, Iterator[Step]] | None = None
        # A reset paused between its last epoch check and its TRUNCATE (its holder, what it knows).
        self.paused_reset: tuple[str, ResetTicket] | None = None
        self.lease_refusal: str | None = None  # the last start refused by a reset's lease

    # --- the world ---

    @rule(partition=st.integers(0, MAX_PARTITIONS - 1), words=st.lists(st.sampled_from(WORDS), max_size=3),
          null=st.booleans(), ahead_ms=st.sampled_from(AHEAD_MS), after_ms=st.sampled_from(AFTER_MS))  # fmt: skip
    def produce(self, partition: int, words: list[str], null: bool, ahead_ms: int, after_ms: int) -> None:
        """`after_ms` later by the clock, a record of `words` on the topic (`null`: a message
        without a value), at `ahead_ms` ahead of the clock."""
        self.world.clock_ms += after_ms
        topic = self.world.topic
        value = None if null else " ".join(words)
        topic.produce(partition % topic.partition_count, value, self.world.clock_ms + ahead_ms)

    @precondition(lambda self: self.world.topic.partition_count < MAX_PARTITIONS)
    @rule()
    def add_partition(self) -> None:
        self.world.topic.add_partition()

    # --- the job ---

    @precondition(lambda self: self.job is None and self.refusal is None)
    @rule(max_future_ms=st.sampled_from(MAX_FUTURE_MS), max_offsets=st.sampled_from((None, 1, 2, 3)),
          crash_at=STEP_INDEX, order=st.integers(0, 3))  # fmt: skip
    def start_job(self, max_future_ms: int, max_offsets: int | None, crash_at: int | None, order: int) -> None:
        """The job (re)started on the checkpoint in use, maybe with other settings."""
        self._start(RunSettings(max_future_ms, max_offsets), crash_at, order)

    @precondition(lambda self: self.job is not None)
    @rule(crash_at=STEP_INDEX, backup_at=STEP_INDEX, order=st.integers(0, 3))
    def trigger(self, crash_at: int | None, backup_at: int | None, order: int) -> None:
        """The query's next micro-batch, if there are new records; the checkpoint copied after
        step `backup_at` of it (a backup taken while the job runs), the driver killed after step
        `crash_at` (past its last step: once the batch is committed, between batches)."""
        self._run(self.job.trigger(order), crash_at, backup_at)

    # --- more than one writer, and registry timeouts (the key-value kind: StreamJob.protocol_faults) ---

    @precondition(lambda self: self.zombie is None and self.job_class.protocol_faults() and self._batch_ahead())
    @rule(pause_at=st.integers(0, 4), order=st.integers(0, 3))
    def trigger_and_pause(self, pause_at: int, order: int) -> None:
        """The query's next micro-batch, its driver paused after step `pause_at` (past its last
        step: between batches) for longer than the lease TTL (SIGSTOP, a GC pause, a suspended
        VM): the job no longer runs; the paused driver goes on later (zombie_resumes)."""
        self._run(self.job.trigger(order), None, pause_at=pause_at)

    def _batch_ahead(self) -> bool:
        """A job runs and its next trigger has a batch to run (one to run again, or new records)."""
        if self.job is None or self.job.query is None:
            return False
        folder = self.job.folder
        latest = folder.latest_batch()
        if latest is not None and latest not in folder.commits:
            return True
        start = {} if latest is None else folder.offsets[latest]
        return any(end > start.get(partition, 0) for partition, end in self.world.topic.latest().items())

    @precondition(lambda self: self.zombie is not None)
    @rule(crash_at=STEP_INDEX)
    def zombie_resumes(self, crash_at: int | None) -> None:
        """The paused driver goes on with its batch's steps, the invariant checked after each:
        its registry updates are refused once another writer took the store (StoreFencedError,
        exit 2), its entry writes and dead letters are not fenced. A driver that finished its
        batch stops at the next one's lease check (LeaseLostError, exit 2)."""
        (job, steps), self.zombie = self.zombie, None
        self.steps = ["the paused driver goes on"]
        try:
            for index, step in enumerate(steps):
                self.steps.append(step.what)
                self.truth.observe(step)
                self._check()
                if index == crash_at:
                    steps.close()
                    self.steps.append("the paused driver crashed")
                    return
            job.check_lease()
        except (StoreFencedError, LeaseLostError, CassandraUnavailableError) as stopped:
            self.steps.append(f"the paused driver stopped (exit 2): {stopped}")
            job.release_lease()
            return
        except (CheckpointMismatchError, StoreTableLostError, SparkAssertionError) as failed:
            # Paused in its start-up (kafka_events.start_and_pause): refused by its checks (exit 2), or
            # its query's first plan failed on a partition added meanwhile (exit 1, as in _run).
            self.steps.append(f"the paused driver's start failed: {failed}")
            job.release_lease()
            return
        raise AssertionError(self._report(["the paused driver went on: its lease still holds"]))

    @precondition(lambda self: self.job_class.protocol_faults())
    @rule(outcomes=st.lists(st.sampled_from((LWT_APPLIED, LWT_LOST, LWT_LATE)), min_size=1, max_size=3))
    def registry_times_out(self, outcomes: list[str]) -> None:
        """The next registry transactions (take_epoch, record_topic_id, begin_batch, record_batch,
        whichever writer runs them), one each, time out with these outcomes; three in a row exhaust
        the driver's retries."""
        self.world.cassandra.lwt_faults = list(outcomes)

    @precondition(
        lambda self: (
            self.job is None and self.refusal is None and self.paused_reset is None and self.job_class.protocol_faults()
        )
    )
    @rule(drop=st.booleans())
    def operator_acts(self, drop: bool) -> None:
        """Between runs: `statestore reset` (the next start is on the checkpoint in use, refused
        once it committed a batch, or a new one, as the scheduler chooses); or (`drop`) the
        store's table dropped while its registry keeps its progress (by hand, or a drop-store
        interrupted between its DROP and its unregister)."""
        if not drop:
            self._reset()
            return
        self.world.cassandra.drop_table()
        self.steps = ["the store's table dropped by hand"]

    @precondition(
        lambda self: (
            self.job is None
            and self.refusal is None
            and self.paused_reset is None
            and self.job_class.protocol_faults()
            and self.world.cassandra.table_present
        )
    )
    @rule()
    def operator_resets_and_pauses(self) -> None:
        """`statestore reset` between runs, paused (SIGSTOP, a GC pause, a suspended VM) for
        longer than any lease TTL right after its last epoch check, before its TRUNCATE (which no
        transaction can make conditional). It goes on later (paused_reset_resumes) or its process
        is killed (paused_reset_killed); meanwhile the job may be started (refused while the
        reset's lease holds: admin.RESET_LEASE_DURABLE)."""
        self.steps = []
        holder = self._reset_lease(writer_stopped=False)
        if holder is None:
            return
        world = self.world
        ticket = world.cassandra.reset_fenced()
        paused_at = world.clock_ms
        world.clock_ms += LEASE_TTL_MS + 1
        if not admin.RESET_LEASE_DURABLE:  # a lease with a TTL lapses while its holder is paused
            world.cassandra.lease.expires_ms = paused_at + LEASE_TTL_MS
        self.paused_reset = holder, ticket
        self.steps.append(f"{holder} took epoch {ticket.epoch}, checked it, and paused before its TRUNCATE")

    @precondition(lambda self: self.paused_reset is not None)
    @rule()
    def paused_reset_resumes(self) -> None:
        """The paused reset goes on: its TRUNCATE, then the rest of the reset, refused
        (StoreFencedError, exit 4) at its next epoch check if another writer took the store."""
        (holder, ticket), self.paused_reset = self.paused_reset, None
        cassandra = self.world.cassandra
        self.steps = [f"the paused {holder} goes on: TRUNCATE"]
        try:
            cassandra.reset_deleting(ticket)
        except StoreFencedError as fenced:
            self.steps.append(f"the reset stopped (exit 4): {fenced}")
            self._release_reset_lease(holder)
            self._check()
            return
        self._release_reset_lease(holder)
        self.truth.forget(cassandra)
        self.steps.append("the reset finished")

    @precondition(lambda self: self.paused_reset is not None)
    @rule()
    def paused_reset_killed(self) -> None:
        """The paused reset's process is killed: it never goes on; its lease stays (it has no TTL)."""
        (holder, _), self.paused_reset = self.paused_reset, None
        self.steps = [f"the paused {holder} was killed"]

    @precondition(
        lambda self: self.job is None and self.paused_reset is None and self._reset_lease_held() and self.lease_refusal
    )
    @rule()
    def way_out_reset_writer_stopped(self) -> None:
        """The way out of a start refused by the lease of a reset whose process is gone: the reset
        run again with --writer-stopped, which takes its lease over and does the whole reset."""
        self._reset(writer_stopped=True)

    def _reset_lease_held(self) -> bool:
        held = self.world.cassandra.live_lease(self.world.clock_ms)
        return held is not None and held.checkpoint == RESET_CHECKPOINT

    @precondition(lambda self: self.job is None and self.job_class.protocol_faults())
    @rule(retention_ms=st.sampled_from(RETENTIONS_MS))
    def operator_sets_retention(self, retention_ms: int | None) -> None:
        """`statestore set-retention` between runs (None: none): from the next batch on, a key
        dated before the stream time minus the retention counts from zero, and reads leave it out."""
        self.world.cassandra.record_retention(retention_ms)
        self.steps = [f"statestore set-retention {retention_ms} ms"]

    # --- the operator ---

    @precondition(lambda self: self.job is None and self.refusal is None and self.backups)
    @rule(which=st.integers(0, 7))
    def restore_backup(self, which: int) -> None:
        """A copy of the checkpoint put back in its place (`which`: 0 the latest copy, 1 the one
        before, ...). The next start is on it."""
        self.replaced = self.world.checkpoint
        self.world.checkpoint = self.backups[-1 - which % len(self.backups)].copy()

    @precondition(lambda self: self.job is None and self.refusal is None)
    @rule(recover=st.booleans(), max_future_ms=st.sampled_from(MAX_FUTURE_MS),
          max_offsets=st.sampled_from((None, 1, 2, 3)), crash_at=STEP_INDEX, order=st.integers(0, 3))  # fmt: skip
    def new_checkpoint(
        self, recover: bool, max_future_ms: int, max_offsets: int | None, crash_at: int | None, order: int
    ) -> None:
        """The job started on a new, empty checkpoint (the old one lost, say): with
        --recover-from-store, or without (refused once the store holds batches)."""
        self.replaced = self.world.checkpoint
        self.world.new_checkpoint()
        self._start(RunSettings(max_future_ms, max_offsets, recover_from_store=recover), crash_at, order)

    # --- the ways out of a refusal (mismatch_error's text) ---

    @precondition(
        lambda self: self.refusal is not None and self.replaced is not None and "restore the original" in self.refusal
    )
    @rule(crash_at=STEP_INDEX, order=st.integers(0, 3))
    def way_out_restore_original(self, crash_at: int | None, order: int) -> None:
        """The way out "restore the original checkpoint": the one the operator replaced, then a start."""
        self.world.checkpoint, self.replaced = self.replaced, None
        self.refusal = None
        self._start(self.settings, crash_at, order)

    @precondition(
        lambda self: (
            self.refusal is not None and "statestore reset" in self.refusal and self.job_class.protocol_faults()
        )
    )
    @rule(crash_at=STEP_INDEX, order=st.integers(0, 3))
    def way_out_reset(self, crash_at: int | None, order: int) -> None:
        """The way out "start over with `statestore reset`" (the only one of a lost table), then a
        new, empty --checkpoint."""
        self._reset()
        self.replaced = self.world.checkpoint
        self.world.new_checkpoint()
        self.refusal = None
        settings = RunSettings(self.settings.max_future_ms, self.settings.max_offsets_per_trigger)
        self._start(settings, crash_at, order)

    @precondition(lambda self: self.refusal is not None and "new, empty --checkpoint" in self.refusal)
    @rule(crash_at=STEP_INDEX, order=st.integers(0, 3))
    def way_out_recover(self, crash_at: int | None, order: int) -> None:
        """The way out "rerun with a new, empty --checkpoint and --recover-from-store" (for a store
        with no batches, checkpoint.START_OVER's new, empty --checkpoint)."""
        self.replaced = self.world.checkpoint
        self.world.new_checkpoint()
        self.refusal = None
        settings = RunSettings(self.settings.max_future_ms, self.settings.max_offsets_per_trigger, True)
        self._start(settings, crash_at, order)

    # --- running the driver ---

    def _start(self, settings: RunSettings, crash_at: int | None, order: int) -> None:
        self.settings = settings
        self.job = self.job_class(self.world, settings)
        self._run(self.job.start(order), crash_at)

    def _run(
        self, steps: Iterator[Step], crash_at: int | None, backup_at: int | None = None, pause_at: int | None = None
    ) -> None:
        """Run the driver's steps, the invariant checked after each; the checkpoint copied after
        step `backup_at`, the driver killed after step `crash_at`, or paused after step
        `pause_at` (each past the last step: after it). A refusal stops the job."""
        self.steps = []
        try:
            index = -1
            for index, step in enumerate(steps):
                self.steps.append(step.what)
                if step.kind == "commit":  # the query read on: a later failure is a new one
                    self.spark_failed_at = None
                self.truth.observe(step)
                self._check()
                if index == backup_at:
                    self._back_up()
                if index == crash_at:
                    steps.close()
                    self._crash()
                    return
                if index == pause_at or step.kind == PAUSE:  # PAUSE: kafka_events.paused_start
                    self._pause(steps)
                    return
            if backup_at is not None and backup_at > index:
                self._back_up()
            if crash_at is not None and crash_at > index:
                self._crash()
            if pause_at is not None and pause_at > index:
                self._pause(iter(()))
        except (CheckpointMismatchError, StoreTableLostError) as refusal:
            self.steps.append(f"refused: {refusal}")
            self.job.release_lease()
            self.job, self.refusal = None, str(refusal)
        except LeaseHeldError as held:
            # A reset's lease (no TTL): the start is refused, naming the reset and the way out.
            assert "--writer-stopped" in str(held), str(held)
            self.steps.append(f"the job refused to start (exit 2): {held}")
            self.job, self.lease_refusal = None, str(held)
        except CassandraUnavailableError as failure:
            # Exit 2; its way out is a restart once Cassandra answers (any start rule).
            self.steps.append(f"the job stopped (exit 2): {failure}")
            self.job.release_lease()
            self.job = None
        except SparkAssertionError as failure:
            # Spark's query failed (exit 1) before it read anything. Once, on a topic that changed
            # under a starting query, a restart gets past it; twice on the same topic nothing does.
            self.job.release_lease()
            self.job = None
            self.steps.append(f"the job failed (exit 1): {failure}")
            if self.spark_failed_at == self.world.topic.partition_count:
                raise WayOutFailed(self._report(["the job failed again, the topic unchanged"])) from None
            self.spark_failed_at = self.world.topic.partition_count

    def _back_up(self) -> None:
        self.backups.append(self.world.checkpoint.copy())
        self.steps.append(f"checkpoint backed up as backup {len(self.backups) - 1}")

    def _crash(self) -> None:
        self.steps.append("driver crashed")
        self.job.stop_renewing()
        self.job = None

    def _reset(self, writer_stopped: bool = False) -> None:
        """admin.truncate_store: its lease (_reset_lease), then the whole reset, then the lease
        released."""
        self.steps = []
        holder = self._reset_lease(writer_stopped)
        if holder is None:
            return
        world = self.world
        world.cassandra.reset(writer_stopped)
        if writer_stopped and self.zombie is not None:  # the operator made sure its process is gone
            self.zombie = None
            self.steps.append("the paused driver's process is gone (--writer-stopped)")
        self._release_reset_lease(holder)
        self.truth.forget(world.cassandra)
        self.lease_refusal = None
        self.steps.append(f"statestore reset (the store's table generation {world.cassandra.table_generation})")

    def _reset_lease(self, writer_stopped: bool) -> str | None:
        """admin._take_reset_lease: refused while a lease is held (a crashed or paused run's
        lapses within its TTL, and the reset is run again then); an earlier reset's (no TTL) is
        taken over with `writer_stopped`, which the operator passes only once that reset's
        process is gone. The reset's holder name, or None (refused, exit 4)."""
        world = self.world
        held = world.cassandra.live_lease(world.clock_ms)
        if held is not None and held.expires_ms is None:
            assert held.checkpoint == RESET_CHECKPOINT, "a reset while a run holds the lease"
            if not writer_stopped or self.paused_reset is not None:
                refused = held_message(world.cassandra.store, held.holder, held.checkpoint, None)
                self.steps.append(f"statestore reset refused (exit 4): {refused}")
                return None
            self.steps.append(f"the lease of {held.holder} taken over (--writer-stopped)")
        elif held is not None:
            world.clock_ms = held.expires_ms
        holder = f"statestore reset ({world.new_holder()})"
        world.cassandra.lease = LeaseRow(holder, RESET_CHECKPOINT)  # renewed while the reset runs
        return holder

    def _release_reset_lease(self, holder: str) -> None:
        """StoreLease.release (`IF holder = ?`)."""
        lease = self.world.cassandra.lease
        if lease is not None and lease.holder == holder:
            self.world.cassandra.lease = None

    def _pause(self, steps: Iterator[Step]) -> None:
        """The driver paused: its lease lapses (the clock moves past its TTL); the rest of its
        steps wait in `zombie`."""
        self.job.stop_renewing()
        self.world.clock_ms += LEASE_TTL_MS + 1
        self.steps.append(f"driver paused for {LEASE_TTL_MS + 1} ms: its lease lapsed")
        self.zombie, self.job = (self.job, steps), None

    @invariant()
    def store_equals_truth(self) -> None:
        if self.traced is not None:
            self.traced(self, False)
        self._check()

    def teardown(self) -> None:
        if self.traced is not None:
            self.traced(self, True)

    def _check(self) -> None:
        if not self.world.cassandra.table_present:
            return  # nothing to compare until a start creates it, or refuses (StoreTableLostError)
        violations = self.truth.violations(self.world.cassandra)
        if violations.counts:
            raise CountsWrong(self._report(violations.lines()))
        if violations.missing_dead_letters:
            raise DeadLetterMissing(self._report(violations.lines()))
        if violations.unexpected_dead_letters:
            raise DeadLetterUnexpected(self._report(violations.lines()))

    def _report(self, problems: list[str]) -> str:
        lines = ["", *problems, f"{self.world.checkpoint.describe()}", "the driver's steps in this event:"]
        return "\n  ".join([*lines, *self.steps])


def machine_excluding(
    excluded: frozenset[str], base: type[BatchProtocolMachine] = BatchProtocolMachine
) -> type[BatchProtocolMachine]:
    """The state machine `base` (a store kind's) that never takes the events of the known bugs
    `excluded` (KNOWN_BUGS)."""
    unknown = excluded - set(KNOWN_BUGS)
    if unknown:
        raise ValueError(f"unknown known bugs {sorted(unknown)}: choose among {sorted(KNOWN_BUGS)}")
    if not excluded:
        return base
    name = f"{base.__name__}Without_" + "_".join(sorted(e.replace("-", "_") for e in excluded))
    return type(name, (base,), {"excluded": frozenset(excluded)})
