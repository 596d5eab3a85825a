"""Run the batch protocol's simulator for a while: `python -m tests.simulation --seconds N
[--seed S] [--exclude NAME,...]`.

It runs the state machine (tests.simulation.machine; --store sessions: tests.simulation.sessions,
the session store; --store windows: tests.simulation.windows, the window store; --store cache:
tests.simulation.cache, the key-value store with the apply cache; --store aggregates:
tests.simulation.aggregates, an aggregate store of JSON records; --store versioned:
tests.simulation.versioned, a partitioned-versioned store; --store window-aggregates:
tests.simulation.window_aggregates, a window store of JSON records' measures; --store
aggregate-cache: tests.simulation.aggregate_cache, an aggregate store with the apply cache; --store
session-aggregates: tests.simulation.session_aggregates, a session store of JSON records' measures;
--store window-aggregate-cache: tests.simulation.window_aggregate_cache, a window aggregate store
with the apply cache; by default each seed for each kind in turn) seed after seed (S, S+1, ...; S
random unless given), each seed a Hypothesis run of --examples examples (tests.simulation.runner),
until N seconds have passed or one fails. A failure prints its seed and the shortest sequence of
events Hypothesis found (with the driver's steps and how the store differs from the truth), and
exits 1; `--seed S --seconds 0` runs that one seed again. By default every event is taken, the
known bugs' too (KNOWN_BUGS in machine.py, CACHE_KNOWN_BUGS in cache.py); --exclude leaves out the
events that reach the ones named (a bug since fixed, FIXED_BUGS, is taken and leaves nothing out).

With --digest it prints, for each kind and seed, a digest of everything the run did instead
(runner.seed_digest: every example's events and final state, and the failure, if any), each run
in a process of its own, forked before any run: two runs with the same digest ran the same
examples to the same states (compare a seed's on two machines, or before and after a change
that must not change what the simulator runs).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Sequence
from functools import partial

from tests.simulation.runner import (
    ALL_KNOWN_BUGS,
    FIXED_BUGS,
    MACHINES,
    STEPS,
    print_failure,
    run_seed,
    seed_digest,
)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to run (0: one seed)")
    parser.add_argument("--seed", type=int, default=None, help="the first seed (default: random)")
    parser.add_argument("--examples", type=int, default=200, help="examples per seed")
    parser.add_argument("--steps", type=int, default=STEPS, help="events per example")
    parser.add_argument(
        "--store",
        choices=[*sorted(MACHINES), "all"],
        default="all",
        help="the store kind (default: all, each seed run for each kind in turn)",
    )
    parser.add_argument(
        "--exclude",
        default="",
        help=(
            "known bugs whose events are left out, comma-separated: "
            f"{', '.join(sorted(ALL_KNOWN_BUGS)) or '(none now)'}; fixed ones leave nothing out: "
            f"{', '.join(sorted(FIXED_BUGS))}"
        ),
    )
    parser.add_argument(
        "--digest",
        action="store_true",
        help="print a digest of each run (each in a fresh process) instead of stopping at a failure",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments()
    args = parser.parse_args(argv)
    excluded = frozenset(name for name in args.exclude.split(",") if name)
    unknown = excluded - set(ALL_KNOWN_BUGS) - set(FIXED_BUGS)
    if unknown:
        parser.error(f"unknown known bugs {sorted(unknown)}: choose among {sorted(ALL_KNOWN_BUGS)}")
    for name in sorted(excluded & set(FIXED_BUGS)):
        print(f"--exclude {name}: {FIXED_BUGS[name]}; nothing left out", flush=True)
    seed = random.SystemRandom().randrange(2**32) if args.seed is None else args.seed
    began = time.monotonic()
    runs = 0
    stores = sorted(MACHINES) if args.store == "all" else [args.store]
    while True:
        for store in stores:
            if args.digest:
                digest = alone(partial(seed_digest, seed, args.examples, args.steps, store, excluded))
                print(f"seed {seed} ({store}): digest {digest}", flush=True)
                continue
            print(f"seed {seed} ({store}): {args.examples} examples of up to {args.steps} events", flush=True)
            try:
                run_seed(seed, excluded, args.examples, args.steps, store)
            except Exception as failure:  # noqa: BLE001 - the runner's report: the seed and what failed
                print(f"\nFAILED at seed {seed} ({store}) after {time.monotonic() - began:.1f}s", flush=True)
                print_failure(failure)
                return 1
        runs += 1
        seed += 1
        if time.monotonic() - began >= args.seconds:
            break
    done = f"{runs} seed(s) digested" if args.digest else f"no failure in {runs} seed(s)"
    print(f"{done}, {time.monotonic() - began:.1f}s")
    return 0


def alone(run) -> str:
    """`run()`'s text, computed in a child process forked from this one: it starts from this
    process's state as it is now (here, before any run), whatever runs before it did."""
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.close(reading)
        status = 0
        try:
            os.write(writing, run().encode())
        except BaseException:  # noqa: BLE001 - any failure: the parent reports the child's exit
            status = 1
        finally:
            os._exit(status)
    os.close(writing)
    with os.fdopen(reading) as pipe:
        text = pipe.read()
    _, status = os.waitpid(child, 0)
    if status != 0 or not text:
        raise RuntimeError(f"the forked run failed (wait status {status})")
    return text


if __name__ == "__main__":
    sys.exit(main())
