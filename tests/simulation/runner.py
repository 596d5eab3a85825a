"""Seeded runs of the batch protocol's state machine (tests.simulation.machine), shared by the
pytest entry (test_simulation.py) and the command line (`python -m tests.simulation`).

A run is one Hypothesis run of the machine from a seed: the same seed, settings and Hypothesis
version give the same examples, so a seed reproduces a failure. A failure carries the seed in its
notes, after Hypothesis' shortest sequence of events.
"""

from __future__ import annotations

from functools import partial

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.simulation.aggregates import AggregateProtocolMachine
from tests.simulation.cache import CACHE_FIXED_BUGS, CACHE_KNOWN_BUGS, cache_machine_excluding
from tests.simulation.machine import KNOWN_BUGS, machine_excluding
from tests.simulation.sessions import SessionProtocolMachine
from tests.simulation.windows import WindowProtocolMachine

# The runs: a key-value store (machine.py), a session store (sessions.py), a window store
# (windows.py), a key-value store with the apply cache on or off per run (cache.py), an
# aggregate store (aggregates.py: JSON records, a measure of every aggregation).
MACHINES = {
    "kv": machine_excluding,
    "sessions": partial(machine_excluding, base=SessionProtocolMachine),
    "windows": partial(machine_excluding, base=WindowProtocolMachine),
    "cache": cache_machine_excluding,
    "aggregates": partial(machine_excluding, base=AggregateProtocolMachine),
}
# The known bugs each run can leave out (--exclude names any of them: each run takes its own).
KNOWN_TO = {
    "kv": KNOWN_BUGS,
    "sessions": KNOWN_BUGS,
    "windows": KNOWN_BUGS,
    "cache": CACHE_KNOWN_BUGS,
    "aggregates": KNOWN_BUGS,
}
ALL_KNOWN_BUGS = {**KNOWN_BUGS, **CACHE_KNOWN_BUGS}
# Known bugs since fixed: --exclude still takes their names, and leaves nothing out.
FIXED_BUGS = {**CACHE_FIXED_BUGS}
STEPS = 40  # events per example: room for a crash, a backup, a restore and their replays


def simulation_settings(examples: int, steps: int = STEPS) -> settings:
    """Hypothesis' settings of one seeded run: no example database (the seed alone reproduces a run)."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.too_slow],
    )


def run_seed(seed: int, excluded: frozenset[str], examples: int, steps: int = STEPS, store: str = "kv") -> None:
    """One Hypothesis run of the state machine from `seed`, the events of the known bugs
    `excluded` left out; raises what the shortest failing sequence raised, with the seed (and
    the command that runs it again) in its notes."""
    excluded = excluded & set(KNOWN_TO[store])
    machine = MACHINES[store](excluded)
    seeded = type(machine.__name__, (machine,), {"_hypothesis_internal_use_seed": seed})
    try:
        run_state_machine_as_test(seeded, settings=simulation_settings(examples, steps))
    except Exception as failure:
        options = f"--store {store} --seed {seed} --seconds 0 --examples {examples} --steps {steps}"
        if excluded:
            options += f" --exclude {','.join(sorted(excluded))}"
        failure.add_note(f"simulation seed: {seed} (python -m tests.simulation {options})")
        raise


def print_failure(failure: BaseException) -> None:
    """Each failure Hypothesis found (one, or a group of distinct ones): its error, its message
    and its notes (the shortest sequence of events, the seed)."""
    for note in getattr(failure, "__notes__", ()):
        print(note, flush=True)
    failures = failure.exceptions if isinstance(failure, BaseExceptionGroup) else (failure,)
    for number, each in enumerate(failures, 1):
        print(f"\n--- failure {number} of {len(failures)}: {type(each).__name__}: {each}", flush=True)
        for note in getattr(each, "__notes__", ()):
            print(note, flush=True)
