"""The writer of a store's batches, the seams benchmarks use, and what one batch came to.

A StoreWriter is fixed for a run: the store and its Cassandra, the epoch the run took with the
store's lease (every progress update it makes is conditional on that epoch, so a writer that
was taken over records nothing), and how it applies batches. Its `step` is how the driver runs
a step of a batch against Cassandra: timed (BatchSeams.driver_timer) and retried while
Cassandra is unreachable, which only steps that are safe to repeat may be.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from statestore.conn.retry import with_retries
from statestore.core.aggregation import AggregateSpec
from statestore.core.config import DEFAULT_MAX_FUTURE_MS, CassandraConfig
from statestore.core.model import StoreSpec
from statestore.stream.apply import ApplyStats, Timer, partition_applier, timed
from statestore.stream.dead_letters import write_dead_letters
from statestore.stream.json_input import JsonInput

T = TypeVar("T")


class OwnRecords(Protocol):
    """The input stage of a user's own query (statestore.stream.own_query): the measures, and a
    batch's rows of the user's DataFrame as json_input.parsed_records gives a batch of JSON records."""

    aggregate: AggregateSpec

    def parsed_records(self, batch_df): ...


# The input stage of an aggregate store: JSON records from the topic, or a user's own query.
InputStage = JsonInput | OwnRecords

# Where a batch's counts were applied (BatchResult.applied_on); NOWHERE: a batch the store had
# recorded as done already, run again by Spark (position.recorded_done).
DRIVER, EXECUTORS, NOWHERE = "driver", "executors", "nowhere"


@dataclass(frozen=True)
class BatchResult:
    """What one applied batch came to: the apply's figures, its dead letters, where it ran."""

    batch_id: int
    stats: ApplyStats
    dead_letters: int
    dead_letter_reasons: tuple[tuple[str, int], ...] = ()  # (reason, how many), by reason
    applied_on: str = EXECUTORS  # or DRIVER (batch_apply.on_driver_for), or NOWHERE


@dataclass(frozen=True)
class BatchSeams:
    """Where benchmarks look into a batch or swap one of its steps; the job as shipped uses
    the defaults. `make_applier` builds the executors' apply (partition_applier's signature);
    `dead_letters` writes a batch's dead letters; `driver_timer` hears each driver step
    (lease check, registry progress, topic id, checkpoint offsets, first batch start offsets,
    registry begin_batch, apply_batch, dead letters, registry record_batch) and `task_timer` (an
    AccumulatorTimer) the executors' apply phases; `on_batch` sees every applied batch;
    `log_batches` off leaves the batches out of the stream log."""

    make_applier: Callable[..., Callable] = partition_applier
    dead_letters: Callable[..., Counter[str]] = write_dead_letters
    driver_timer: Timer | None = None
    task_timer: Timer | None = None
    on_batch: Callable[[BatchResult], None] | None = None
    log_batches: bool = True


SHIPPED = BatchSeams()


@dataclass(frozen=True)
class StoreWriter:
    """The writer of one store's batches for one run (see the module doc)."""

    config: CassandraConfig
    spec: StoreSpec
    epoch: int  # taken with the lease: the writer's progress updates are refused once a newer one took the store
    seams: BatchSeams = SHIPPED
    driver_records: int = 0  # a batch of at most this many records is applied by the driver (0: never)
    max_future_ms: int = DEFAULT_MAX_FUTURE_MS  # a record further ahead of its batch's clock: a dead letter
    apply_cache: bool = True  # batches of all but versioned stores may use the apply cache (stream.apply_cache)
    # JSON records (stream.json_input) or a user's own query (OwnRecords) into an aggregate store
    # (stream.aggregates); None: text lines, the word count.
    json_input: InputStage | None = None

    @property
    def timer(self) -> Timer | None:
        return self.seams.driver_timer

    def step(self, phase: str, what: str, action: Callable[[], T]) -> T:
        """Run `action`, a driver step safe to repeat: timed under `phase`, retried while
        Cassandra is unreachable (`what` names it in the error once the retry budget is spent)."""
        return timed(self.timer, phase, lambda: with_retries(self.config, what, action))
