"""Changes to our job tried out in the benchmark before anyone makes them in statestore/
(`streaming_compare.py --experiment NAME`, our systems only). Each patches the driver's
module attributes for the worker's whole session; none is the job as shipped.

  dead-letters-count-first  statestore.batches.write_dead_letters runs one counting job
                            first and streams the dead letters (one job per partition of a
                            two-branch union) only when there are some
  dead-letters-off          no dead-letter step at all: the most any change to it can gain
                            (a measurement, not a correct job: dead letters are lost)
"""

from __future__ import annotations


def _count_first() -> None:
    from statestore import batches

    stream_them = batches.write_dead_letters

    def write_if_any(session, batch_df, spec, batch_id):
        from statestore.wordcount import dead_letter_rows

        if dead_letter_rows(batch_df).isEmpty():
            return 0
        return stream_them(session, batch_df, spec, batch_id)

    batches.write_dead_letters = write_if_any


def _off() -> None:
    from statestore import batches

    batches.write_dead_letters = lambda session, batch_df, spec, batch_id: 0


EXPERIMENTS = {"dead-letters-count-first": _count_first, "dead-letters-off": _off}


def apply(names: list[str]) -> None:
    for name in names:
        EXPERIMENTS[name]()
