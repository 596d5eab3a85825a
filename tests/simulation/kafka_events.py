"""Kafka's events of the batch protocol's state machine, and a pause during start-up: the rules
BatchProtocolMachine (machine.py) takes from KafkaEvents, so every store kind has them.

- Transactions (fake_kafka.FakeTopic: control records, the last stable offset): a transactional
  producer opens a transaction; the records produced next go into it (of every kind: each
  kind's own `produce` rule) until the producer is switched back to a plain one or the
  transaction ends; two may be open at once. It commits or aborts later, maybe after batches
  were planned over the partition's other records. The job reads at its own isolation level
  (conn.kafka.spark_source_options: read_committed), so Spark's latest offsets stop at the
  last stable offset; the truth counts committed records only.
- The topic deleted and created again under its name (new id, offsets from 0), once a
  key-value store recorded batches (a running query fails: exit 1): the next start is refused by the real
  checkpoint.topic_problem (CheckpointMismatchError with checkpoint.NEW_TOPIC), whose way out,
  `statestore reset` then a new, empty --checkpoint, the machine takes (way_out_reset). The
  truth judges the store against the deleted topic until then (truth.Truth: the registry's
  topic_id).
- A driver paused during start-up (key-value stores): after it took the lease and the store's
  epoch, before its first batch, for longer than the lease TTL; it goes on later
  (zombie_resumes) with the rest of its start (recording the topic id, the query) and its first
  batch, whose registry updates the epoch fences and whose lease check stops it.
"""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from tests.simulation.driver import RunSettings, Step, StreamJob
from tests.simulation.truth import Truth

MAX_OPEN_TRANSACTIONS = 2
PAUSE = "pause"  # the kind of the Step after which BatchProtocolMachine._run pauses the driver


def paused_start(job: StreamJob, order: int, later: int) -> Iterator[Step]:
    """job.start then the query's first trigger, with a PAUSE step `later` steps after the
    epoch was taken (at the latest, once the query started: before its first batch)."""
    countdown = None
    paused = False
    for step in job.start(order):
        yield step
        if step.kind == "epoch":
            countdown = later
        elif countdown is not None:
            countdown -= 1
        if not paused and countdown is not None and (countdown <= 0 or step.kind == "query"):
            paused = True
            yield Step(PAUSE, "the driver pauses during its start-up")
    yield from job.trigger(order)


class KafkaEvents:
    """The rules of the module doc, mixed into BatchProtocolMachine (which has the world, the
    job, the zombie and _run)."""

    # --- transactions ---

    @precondition(lambda self: len(self.world.topic.open) < MAX_OPEN_TRANSACTIONS)
    @rule()
    def transaction_begins(self) -> None:
        """A transactional producer opens a transaction; the records produced next go into it."""
        topic = self.world.topic
        topic.producing_into = topic.begin_transaction()
        self.steps = [f"transaction {topic.producing_into} begins"]

    @precondition(lambda self: self.world.topic.producing_into is not None)
    @rule()
    def plain_producer(self) -> None:
        """The records produced next come from a producer outside any transaction (the open
        ones stay open)."""
        self.world.topic.producing_into = None
        self.steps = ["the next records are produced outside transactions"]

    @precondition(lambda self: self.world.topic.open)
    @rule(which=st.integers(0, MAX_OPEN_TRANSACTIONS - 1), commit=st.booleans())
    def transaction_ends(self, which: int, commit: bool) -> None:
        """An open transaction commits or aborts: a control record on each partition it wrote to."""
        topic = self.world.topic
        transaction = sorted(topic.open)[which % len(topic.open)]
        topic.end_transaction(transaction, commit)
        self.steps = [f"transaction {transaction} {'committed' if commit else 'aborted'}"]

    # --- the topic created again ---

    @precondition(
        lambda self: (
            self.zombie is None
            and self.paused_reset is None
            and self.refusal is None
            and self.job_class.protocol_faults()
            and type(self.truth) is Truth  # whose truth follows the topic's id: the key-value kind's
            and self.world.cassandra.progress().has_batches
        )
    )
    @rule(partitions=st.integers(1, 2))
    def topic_created_again(self, partitions: int) -> None:
        """The topic deleted and created again under its name with `partitions` partitions. A
        running query fails at its next trigger (Spark's Kafka source: partitions deleted, with
        failOnDataLoss, its default; exit 1), between batches here. The backups of the
        checkpoint name the deleted topic's offsets: they are not restored after (Spark fails
        on offsets past a partition's end, which the fake Spark does not model)."""
        self.steps = []
        if self.job is not None:
            self.job.release_lease()  # RunningStream.stop
            self.job = None
            self.steps.append("the query failed (exit 1): partitions of its topic were deleted")
        self.world.topic.recreate(partitions)
        self.backups = []
        self.replaced = None
        self.steps.append(f"topic deleted and created again: id {self.world.topic.topic_id}, {partitions} partition(s)")

    # --- a pause during start-up ---

    @precondition(
        lambda self: (
            self.job is None
            and self.refusal is None
            and self.zombie is None
            and self.paused_reset is None
            and self.job_class.protocol_faults()
        )
    )
    @rule(later=st.integers(0, 2), order=st.integers(0, 3), recover=st.booleans())
    def start_and_pause(self, later: int, order: int, recover: bool) -> None:
        """The job (re)started with the last run's settings on the checkpoint in use (`recover`:
        on a new, empty one with --recover-from-store, which finishes the store's pending batch
        during its start); paused `later` steps after it took the lease and the store's epoch
        (at the latest once its query started, before its first batch) for longer than the
        lease TTL."""
        if recover:
            self.replaced = self.world.checkpoint
            self.world.new_checkpoint()
        self.settings = RunSettings(self.settings.max_future_ms, self.settings.max_offsets_per_trigger, recover)
        self.job = self.job_class(self.world, self.settings)
        self._run(paused_start(self.job, order, later), None)
