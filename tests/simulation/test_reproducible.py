"""Every seed of the simulator reproduces (issue 45: "every run from a seed; a failure prints its
seed and the shortest sequence of events that fails"): a seed's run is the same alone in a fresh
process, after other seeds and kinds in this one, and under another PYTHONHASHSEED; a failing
seed reports the same failure however fast the machine runs; and the command a failure prints
runs that same run, for every kind."""

from __future__ import annotations

import itertools
import os
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest
from hypothesis.internal.conjecture import engine
from hypothesis.stateful import invariant

from statestore.stream import faults
from tests.simulation import __main__ as cli
from tests.simulation.runner import ALL_KNOWN_BUGS, KNOWN_TO, MACHINES, run_seed, seed_digest

ROOT = Path(__file__).resolve().parents[2]
# Few examples of full length: enough for every kind's events (crashes, restores, resets, task
# attempts) to occur, cheap enough to run each kind twice here and once in a subprocess.
SEED, OTHER_SEED, EXAMPLES, STEPS = 7, 8, 12, 40


def test_a_seed_runs_the_same_alone_after_other_seeds_and_under_another_hash_seed():
    """Each kind's run of SEED (every example's events and final state: runner.seed_digest) is
    the same in a process of its own forked before any run (`python -m tests.simulation
    --digest`, in a subprocess under another PYTHONHASHSEED than this process's) as here, after
    another seed of every kind and SEED of the kinds before it: nothing a run leaves behind
    (module or class state, caches, counters) and no order of a set of strings or bytes changes
    what a seed runs. (It failed with World.new_holder numbering writers from a module-level
    counter, and with batch_deltas taking words in a set's order instead of sorted.)"""
    hash_seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    command = [sys.executable, "-m", "tests.simulation", "--store", "all", "--seed", str(SEED), "--seconds", "0",
               "--examples", str(EXAMPLES), "--steps", str(STEPS), "--digest"]  # fmt: skip
    environment = {**os.environ, "PYTHONHASHSEED": hash_seed}
    alone = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.PIPE, text=True)
    try:
        for store in sorted(MACHINES, reverse=True):
            seed_digest(OTHER_SEED, EXAMPLES, STEPS, store)
        here = {store: seed_digest(SEED, EXAMPLES, STEPS, store) for store in sorted(MACHINES, reverse=True)}
        out, _ = alone.communicate(timeout=300)
    finally:
        alone.kill()
    assert alone.returncode == 0, out
    assert printed_digests(out) == here


def printed_digests(out: str) -> dict[str, str]:
    """`seed S (kind): digest D` lines: each kind's digest."""
    return {line.split("(")[1].split(")")[0]: line.split()[-1] for line in out.splitlines() if "): digest " in line}


class FirstFailure(AssertionError):
    pass


class SecondFailure(AssertionError):
    pass


def failing(base):
    """A kind's machine with two failures to find: a third partition, and a third record."""

    class Failing(base):
        @invariant()
        def two_failures(self) -> None:
            topic = self.world.topic
            if topic.partition_count == 3:
                raise FirstFailure("three partitions")
            if len(topic.records()) >= 3:
                raise SecondFailure("three records")

    Failing.__name__ = f"Failing{base.__name__}"
    return Failing


def test_a_failing_seed_reports_the_same_failure_however_fast_the_machine_runs(monkeypatch):
    """A run that found a failure went on looking for others for up to ten seconds of the wall
    clock (Hypothesis' report_multiple_bugs), so a slower machine reported other failures than
    a quick one, from other examples: here one whose clock jumps 11 s between two reads of
    Hypothesis' engine, against this one's. (It failed before runner.simulation_settings set
    report_multiple_bugs=False.)"""
    kind = failing(MACHINES["kv"](frozenset()))
    monkeypatch.setitem(MACHINES, "kv", lambda excluded: kind)
    quick = seed_digest(SEED, 200, 12, "kv")
    jumps = itertools.count(step=11)
    slow = types.SimpleNamespace(monotonic=lambda: next(jumps), perf_counter=engine.time.perf_counter)
    monkeypatch.setattr(engine, "time", slow)
    assert seed_digest(SEED, 200, 12, "kv") == quick


@pytest.mark.parametrize("store", sorted(MACHINES))
def test_the_command_a_failure_prints_runs_the_same_run(store, monkeypatch, capsys):
    """For every kind, the command in a failure's notes (its --store, --seed, --examples, --steps
    and --exclude: a known bug of the kind, a fixed one left out) runs the run that failed: the
    same examples, the same failure, the same bugs left out. (With report_multiple_bugs, three
    kinds of five failed: the failing run's search for more failures and the command's ended at
    other times.)"""
    kind = failing(MACHINES[store](frozenset()))
    monkeypatch.setitem(MACHINES, store, lambda excluded: type(kind.__name__, (kind,), {"excluded": excluded}))
    monkeypatch.setitem(KNOWN_TO, store, {"a-known-bug": "its events"})
    monkeypatch.setitem(ALL_KNOWN_BUGS, "a-known-bug", "its events")
    with pytest.raises(AssertionError) as failed:
        run_seed(SEED, frozenset({"a-known-bug", "ttl-during-batch"}), 30, 9, store)
    note = next(note for note in failed.value.__notes__ if note.startswith("simulation seed: "))
    argv = shlex.split(note.split("(", 1)[1].removesuffix(")"))
    assert argv[:3] == ["python", "-m", "tests.simulation"]
    capsys.readouterr()
    assert cli.main([*argv[3:], "--digest"]) == 0
    failed_run = seed_digest(SEED, 30, 9, store, frozenset({"a-known-bug"}))  # the digest has what was left out
    assert printed_digests(capsys.readouterr().out) == {store: failed_run}


def test_a_seed_runs_the_same_with_the_stream_fault_switch_armed(monkeypatch):
    """STATESTORE_TEST_FAULT (statestore.stream.faults, the integration tests' crash switch) left
    exported in a shell armed the real apply's switch inside the simulator (apply.write_all,
    which the session, window and cached key-value applies run): a batch 0 writing two rows or
    more killed the simulator's own process group. The runner disarms it for its runs (here the
    kill is an exception, to see it)."""

    def killed(signum):
        raise RuntimeError(f"the simulator signalled its own process group ({signum})")

    monkeypatch.setattr(faults, "_signal_job", killed)
    monkeypatch.delenv(faults.ENV, raising=False)
    clean = seed_digest(SEED, EXAMPLES, STEPS, "windows")
    monkeypatch.setenv(faults.ENV, "kill-mid-write:0")
    assert seed_digest(SEED, EXAMPLES, STEPS, "windows") == clean
    assert os.environ[faults.ENV] == "kill-mid-write:0"
