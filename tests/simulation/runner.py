"""Seeded runs of the batch protocol's state machine (tests.simulation.machine), shared by the
pytest entry (test_simulation.py) and the command line (`python -m tests.simulation`).

A run is one Hypothesis run of the machine from a seed: the same seed, settings and Hypothesis
version give the same examples, whatever ran before in the process and under any PYTHONHASHSEED
(test_reproducible.py compares seed_digest's), so a seed reproduces a failure. A failure carries
the seed and the command that runs it again in its notes, after Hypothesis' shortest sequence of
events.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import os
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from statestore.stream import faults
from tests.simulation.aggregate_cache import AggregateCacheProtocolMachine
from tests.simulation.aggregates import AggregateProtocolMachine
from tests.simulation.cache import CACHE_FIXED_BUGS, CACHE_KNOWN_BUGS, cache_machine_excluding
from tests.simulation.machine import KNOWN_BUGS, machine_excluding
from tests.simulation.session_aggregates import SessionAggregateProtocolMachine
from tests.simulation.sessions import SessionProtocolMachine
from tests.simulation.versioned import VersionedProtocolMachine
from tests.simulation.window_aggregate_cache import WindowAggregateCacheProtocolMachine
from tests.simulation.window_aggregates import WindowAggregateProtocolMachine
from tests.simulation.windows import WindowProtocolMachine

# The runs: a key-value store (machine.py), a session store (sessions.py), a window store
# (windows.py), a key-value store with the apply cache on or off per run (cache.py), an
# aggregate store (aggregates.py: JSON records, a measure of every aggregation), a
# partitioned-versioned store (versioned.py: plan_versions' versions of every word), a window
# aggregate store (window_aggregates.py: the aggregate kind's records per key and window), an
# aggregate store with the apply cache (aggregate_cache.py: the cache kind's run, the aggregate
# kind's records), a session aggregate store (session_aggregates.py: the session kind's run, the
# aggregate kind's records folded into each key's sessions), a window aggregate store with the
# apply cache (window_aggregate_cache.py: the cache kind's run, the window aggregate kind's
# windowings and records).
MACHINES = {
    "kv": machine_excluding,
    "sessions": partial(machine_excluding, base=SessionProtocolMachine),
    "windows": partial(machine_excluding, base=WindowProtocolMachine),
    "cache": cache_machine_excluding,
    "aggregates": partial(machine_excluding, base=AggregateProtocolMachine),
    "versioned": partial(machine_excluding, base=VersionedProtocolMachine),
    "window-aggregates": partial(machine_excluding, base=WindowAggregateProtocolMachine),
    "aggregate-cache": partial(cache_machine_excluding, base=AggregateCacheProtocolMachine),
    "session-aggregates": partial(machine_excluding, base=SessionAggregateProtocolMachine),
    "window-aggregate-cache": partial(cache_machine_excluding, base=WindowAggregateCacheProtocolMachine),
}
# The known bugs each run can leave out (--exclude names any of them: each run takes its own).
KNOWN_TO = {
    "kv": KNOWN_BUGS,
    "sessions": KNOWN_BUGS,
    "windows": KNOWN_BUGS,
    "cache": CACHE_KNOWN_BUGS,
    "aggregates": KNOWN_BUGS,
    "versioned": KNOWN_BUGS,
    "window-aggregates": KNOWN_BUGS,
    "aggregate-cache": CACHE_KNOWN_BUGS,
    "session-aggregates": KNOWN_BUGS,
    "window-aggregate-cache": CACHE_KNOWN_BUGS,
}
ALL_KNOWN_BUGS = {**KNOWN_BUGS, **CACHE_KNOWN_BUGS}
# Known bugs since fixed: --exclude still takes their names, and leaves nothing out.
FIXED_BUGS = {**CACHE_FIXED_BUGS}
STEPS = 40  # events per example: room for a crash, a backup, a restore and their replays


def simulation_settings(examples: int, steps: int = STEPS) -> settings:
    """Hypothesis' settings of one seeded run, whatever profile is loaded (pytest's "ci" or
    none): no example database (the seed alone reproduces a run), and one failure reported, the
    first found, shrunk. With Hypothesis' default (report_multiple_bugs) a run that found a
    failure went on looking for others for up to ten seconds of the wall clock, so which ones it
    reported depended on how fast the machine ran."""
    return settings(
        parent=settings.get_profile("default"),
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        derandomize=False,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow],
    )


def reproduce_command(seed: int, excluded: frozenset[str], examples: int, steps: int, store: str) -> str:
    """The command that runs the run of `seed` again (run_seed's arguments), alone."""
    options = f"--store {store} --seed {seed} --seconds 0 --examples {examples} --steps {steps}"
    if excluded:
        options += f" --exclude {','.join(sorted(excluded))}"
    return f"python -m tests.simulation {options}"


def run_seed(
    seed: int, excluded: frozenset[str], examples: int, steps: int = STEPS, store: str = "kv", traced=None
) -> None:
    """One Hypothesis run of the state machine from `seed`, the events of the known bugs
    `excluded` left out; raises what the shortest failing sequence raised, with the seed (and
    the command that runs it again) in its notes. `traced(machine, end)`, if given, is called
    after every event of every example and at its end (seed_digest's)."""
    excluded = excluded & set(KNOWN_TO[store])
    machine = MACHINES[store](excluded)
    attributes: dict[str, Any] = {"_hypothesis_internal_use_seed": seed}
    if traced is not None:
        attributes["traced"] = staticmethod(traced)
    seeded = type(machine.__name__, (machine,), attributes)
    try:
        with fault_switch_disarmed(), hypothesis_constants_only():
            run_state_machine_as_test(seeded, settings=simulation_settings(examples, steps))
    except Exception as failure:
        failure.add_note(f"simulation seed: {seed} ({reproduce_command(seed, excluded, examples, steps, store)})")
        raise


@contextmanager
def hypothesis_constants_only():
    """Hypothesis now and then draws a constant it found in the project's loaded modules
    (hypothesis.internal.conjecture.providers' local constants), and which modules are loaded
    differs between a pytest run (every test module collected) and the command line: the same
    seed then drew other examples (the reproducibility test failed in CI's lane, after the unit
    tests were collected, and passed alone). While a run runs, only Hypothesis' own constants are
    drawn; the constants cache is emptied before and after, so no earlier test's choices carry in."""
    from hypothesis.internal.conjecture import providers

    found = providers._get_local_constants
    providers._get_local_constants = providers.Constants
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = found
        providers.CONSTANTS_CACHE.cache.clear()


@contextmanager
def fault_switch_disarmed():
    """The stream's crash switch (statestore.stream.faults: STATESTORE_TEST_FAULT, which the
    real applies the simulator runs check) unset while a run runs, and put back after: left
    exported in a shell, it made the simulator kill its own process group."""
    armed = os.environ.pop(faults.ENV, None)
    try:
        yield
    finally:
        if armed is not None:
            os.environ[faults.ENV] = armed


def seed_digest(seed: int, examples: int, steps: int = STEPS, store: str = "kv", excluded=frozenset()) -> str:
    """A digest of everything the run of `seed` does: every example's events (the driver's
    steps of each, the clock, the topic's offsets, the registry row, the checkpoint), every
    example's final state (the world: the store, its dead letters, the registry, the topic, the
    checkpoint and its backups; the known bugs left out) and the failure the run ends with, if
    any. Two runs of a seed with the same digest ran the same examples to the same states."""
    digest = hashlib.sha256()

    def traced(machine, end: bool) -> None:
        world = machine.world
        digest.update(canonical(machine.steps).encode())
        digest.update(
            canonical((world.clock_ms, world.topic.latest(), world.cassandra.progress(), world.checkpoint)).encode()
        )
        if end:
            ending = (world, machine.backups, machine.refusal, machine.job is None, machine.excluded)
            digest.update(canonical(ending).encode())
        digest.update(b"\x00")

    try:
        run_seed(seed, excluded, examples, steps, store, traced=traced)
    except Exception as failure:  # noqa: BLE001 - the failure is part of what the run does
        digest.update(f"failed: {type(failure).__name__}: {failure}".encode())
    return digest.hexdigest()


def canonical(value: Any, _within: frozenset[int] = frozenset()) -> str:
    """`value` as text that depends on nothing but its contents: dataclasses and objects by
    their fields, sets and mappings sorted, functions and objects met again (cycles) by their
    type alone (an address never shows)."""
    if value is None or isinstance(value, bool | int | float | str | bytes | enum.Enum | datetime):
        return repr(value)
    if callable(value) or id(value) in _within:
        return f"<{type(value).__name__}>"
    within = _within | {id(value)}
    if dataclasses.is_dataclass(value):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        extra = {k: v for k, v in vars(value).items() if k not in fields} if hasattr(value, "__dict__") else {}
        return f"{type(value).__name__}({canonical({**fields, **extra}, within)})"
    if isinstance(value, dict):
        items = sorted(f"{canonical(k, within)}: {canonical(v, within)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, set | frozenset):
        return "{" + ", ".join(sorted(canonical(each, within) for each in value)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(canonical(each, within) for each in value) + "]"
    if hasattr(value, "__dict__"):
        return f"{type(value).__name__}({canonical(vars(value), within)})"
    return f"<{type(value).__name__}>"


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
