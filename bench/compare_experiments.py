"""Changes to our job tried out in the benchmark before anyone makes them in statestore/
(`streaming_compare.py --experiment NAME`, our systems only). Each patches the driver's
module attributes for the worker's whole session; none is the job as shipped.

  dead-letters-off          no dead-letter step at all (a measurement, not a correct job:
                            dead letters are lost). Since the apply job counts what a batch
                            cannot count, a batch without dead letters runs no dead-letter
                            job anyway, so on a clean corpus this equals the job as shipped.
"""

from __future__ import annotations


def _off() -> None:
    from statestore import batches

    batches.write_dead_letters = lambda session, batch_df, spec, batch_id: 0


# dead-letters-count-first, tried here first, was the job's behaviour until the apply job
# itself counted what it cannot count (statestore.batches.apply_batch).
EXPERIMENTS = {"dead-letters-off": _off}


def apply(names: list[str]) -> None:
    for name in names:
        EXPERIMENTS[name]()
