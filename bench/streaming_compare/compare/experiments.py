"""Changes to our job tried out in the benchmark before anyone makes them in statestore/
(`streaming_compare.py --experiment NAME`, our systems only). Each is a function returning
overrides of statestore's BatchSeams (statestore.stream.writer) that the worker passes to
statestore.stream.job.start for every run of its session; none is the job as shipped.

  dead-letters-off          no dead-letter step at all (a measurement, not a correct job:
                            dead letters are lost). Since the apply job counts what a batch
                            cannot count, a batch without dead letters runs no dead-letter
                            job anyway, so on a clean corpus this equals the job as shipped.
"""

from __future__ import annotations

from collections import Counter


def _no_dead_letters(session, batch_df, spec, batch_id) -> Counter:
    return Counter()


def _off() -> dict:
    return {"dead_letters": _no_dead_letters}


# dead-letters-count-first, tried here first, was the job's behaviour until the apply job
# itself counted what it cannot count (statestore.stream.batch_apply.apply_batch).
EXPERIMENTS = {"dead-letters-off": _off}


def seams(names: list[str]):
    """The BatchSeams of the job as shipped with the named experiments' overrides."""
    from dataclasses import replace

    from statestore.stream.writer import SHIPPED

    overrides: dict = {}
    for name in names:
        overrides.update(EXPERIMENTS[name]())
    return replace(SHIPPED, **overrides)
