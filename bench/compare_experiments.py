"""Changes to our job tried out in the benchmark before anyone makes them in statestore/
(`streaming_compare.py --experiment NAME`, our systems only). Each patches the driver's
module attributes for the worker's whole session; none is the job as shipped.

  dead-letters-off          no dead-letter step at all: the most any change to it can gain
                            (a measurement, not a correct job: dead letters are lost)
"""

from __future__ import annotations


def _off() -> None:
    from statestore import batches

    batches.write_dead_letters = lambda session, batch_df, spec, batch_id: 0


# dead-letters-count-first, tried here first, is now the job's own behaviour (statestore.batches).
EXPERIMENTS = {"dead-letters-off": _off}


def apply(names: list[str]) -> None:
    for name in names:
        EXPERIMENTS[name]()
