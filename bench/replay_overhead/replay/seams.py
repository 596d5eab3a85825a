"""How each run of the replay-overhead benchmark sets up the job: the statestore BatchSeams
(statestore.stream.writer) it passes to statestore.stream.job.start. The job's own steps are
never patched; the seams choose the apply (the real one or the counter baseline), the
dead-letter step (as shipped or the count-first experiment), and what is timed.
"""

from __future__ import annotations

from collections import Counter

from bench_common import StepClock

from replay.counter import counter_applier

# The library's names of the driver's steps (BatchSeams.driver_timer) -> the report's labels.
# A profiled run keeps all of these; any other run only apply_batch. ("registry progress" is
# not reported: this benchmark never timed it.)
PROFILE_DRIVER_LABELS = {
    "lease check": "lease check",
    "checkpoint offsets": "checkpoint offsets",
    "first batch start offsets": "first batch start offsets (driver job)",
    "apply_batch": "apply_batch",
    "registry begin_batch": "registry begin_batch",
    "dead letters": "dead letters (driver job)",
    "registry record_batch": "registry record_batch",
}
DRIVER_LABELS = {"apply_batch": "apply_batch"}
# The executor phases a profiled run times (Spark accumulators): the real apply reports read,
# plan and write, the counter baseline group and write; both task and slices.
EXECUTOR_PHASES = ("read", "plan", "write", "group", "task", "slices")


def count_first(write_dead_letters):
    """An experiment (--dead-letters count-first), for a while the job's own behaviour, since
    superseded (the apply job counts what it cannot count, and a clean batch runs no
    dead-letter job at all; with this wrapper it runs one count): skip the streaming
    of dead letters when one counting job finds none. statestore.stream.dead_letters.write_dead_letters
    streams them with toLocalIterator(), which runs one Spark job per partition of
    dead_letter_rows (a union of two branches over every Kafka partition) for every batch,
    even though the set is almost always empty."""

    def write_if_any(session, batch_df, spec, batch_id, **options):
        from statestore.stream.transforms import dead_letter_rows

        if dead_letter_rows(batch_df).count() == 0:
            return Counter()
        return write_dead_letters(session, batch_df, spec, batch_id, **options)

    return write_if_any


def run_seams(variant: str, dead_letters: str, driver: Counter, batch_keys: list[int], task_timer=None):
    """The seams of one run of `variant`: its apply (the counter baseline for counter*), its
    dead-letter step (--dead-letters), the driver's steps timed into `driver` (all of them when
    the run is profiled, i.e. has a `task_timer` for the executors' phases; else apply_batch
    only), and every batch's number of keys appended to `batch_keys`."""
    from statestore.stream.apply import partition_applier
    from statestore.stream.dead_letters import write_dead_letters
    from statestore.stream.writer import BatchSeams

    profiled = task_timer is not None
    return BatchSeams(
        make_applier=counter_applier if variant.startswith("counter") else partition_applier,
        dead_letters=count_first(write_dead_letters) if dead_letters == "count-first" else write_dead_letters,
        driver_timer=StepClock(PROFILE_DRIVER_LABELS if profiled else DRIVER_LABELS, driver),
        task_timer=task_timer,
        on_batch=lambda result: batch_keys.append(result.stats.keys),
    )
