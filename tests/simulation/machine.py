"""The Hypothesis state machine that composes the events of the batch protocol: records
produced (some without a value, some far in the future) as the clock moves, partitions added,
the job started and restarted with other settings, micro-batches run, the driver crashing after
any step of one, checkpoint backups taken (even mid-batch) and restored, the checkpoint lost,
`--recover-from-store` with a new checkpoint. The invariant (truth.Truth) is checked after
every step of the driver, not only after every event.

A refusal (CheckpointMismatchError) stops the job; the operator's only events then are the
refusal's documented ways out (restore the checkpoint that was replaced, or a new checkpoint
with --recover-from-store; records keep arriving meanwhile), and the invariant must hold
through them. A failure of Spark's that no way out documents (WayOutFailed) fails the run.

Known bugs, until fixed, can be left out by event (KNOWN_BUGS): a subclass made by
`machine_excluding` never takes the events that reach them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from statestore.core.errors import CheckpointMismatchError
from tests.simulation.driver import RunSettings, Step, StreamJob, World
from tests.simulation.fake_spark import CheckpointFolder, SparkAssertionError
from tests.simulation.truth import Truth

# The known bugs (issue 45's item number, or a name for one the simulator found) and what
# leaving out the events that reach each means. A bug's entry goes once it is fixed.
KNOWN_BUGS: dict[str, str] = {}

WORDS = ("a", "b", "c", "B")
MAX_PARTITIONS = 3
MAX_FUTURE_MS = (1_000, 60_000, 300_000)
AHEAD_MS = (0, 0, 30_000, 120_000, 900_000)  # a record's time ahead of the clock when produced
AFTER_MS = (0, 0, 1_000, 100_000, 1_000_000)  # how far the clock moves before a record is produced
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


class BatchProtocolMachine(RuleBasedStateMachine):
    """The batch protocol of one key-value store's stream (see the module doc)."""

    excluded: ClassVar[frozenset[str]] = frozenset()
    job_class: ClassVar[type[StreamJob]] = StreamJob  # the driver of the store kind (sessions.SessionStreamJob)

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

    @precondition(lambda self: self.refusal is not None and self.replaced is not None)
    @rule(crash_at=STEP_INDEX, order=st.integers(0, 3))
    def way_out_restore_original(self, crash_at: int | None, order: int) -> None:
        """The way out "restore the original checkpoint": the one the operator replaced, then a start."""
        self.world.checkpoint, self.replaced = self.replaced, None
        self.refusal = None
        self._start(self.settings, crash_at, order)

    @precondition(lambda self: self.refusal is not None)
    @rule(crash_at=STEP_INDEX, order=st.integers(0, 3))
    def way_out_recover(self, crash_at: int | None, order: int) -> None:
        """The way out "rerun with a new, empty --checkpoint and --recover-from-store"."""
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

    def _run(self, steps: Iterator[Step], crash_at: int | None, backup_at: int | None = None) -> None:
        """Run the driver's steps, the invariant checked after each; the checkpoint copied after
        step `backup_at`, the driver killed after step `crash_at` (either past the last step:
        after it). A refusal stops the job."""
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
            if backup_at is not None and backup_at > index:
                self._back_up()
            if crash_at is not None and crash_at > index:
                self._crash()
        except CheckpointMismatchError as refusal:
            self.steps.append(f"refused: {refusal}")
            self.job, self.refusal = None, str(refusal)
        except SparkAssertionError as failure:
            # Spark's query failed (exit 1) before it read anything. Once, on a topic that changed
            # under a starting query, a restart gets past it; twice on the same topic nothing does.
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
        self.job = None

    @invariant()
    def store_equals_truth(self) -> None:
        self._check()

    def _check(self) -> None:
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


def machine_excluding(excluded: frozenset[str]) -> type[BatchProtocolMachine]:
    """The state machine that never takes the events of the known bugs `excluded` (KNOWN_BUGS)."""
    unknown = excluded - set(KNOWN_BUGS)
    if unknown:
        raise ValueError(f"unknown known bugs {sorted(unknown)}: choose among {sorted(KNOWN_BUGS)}")
    if not excluded:
        return BatchProtocolMachine
    name = "BatchProtocolMachineWithout_" + "_".join(sorted(e.replace("-", "_") for e in excluded))
    return type(name, (BatchProtocolMachine,), {"excluded": frozenset(excluded)})
