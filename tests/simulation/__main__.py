"""Run the batch protocol's simulator for a while: `python -m tests.simulation --seconds N
[--seed S] [--exclude NAME,...]`.

It runs the state machine (tests.simulation.machine; --store sessions: tests.simulation.sessions,
the session store; --store windows: tests.simulation.windows, the window store; --store cache:
tests.simulation.cache, the key-value store with the apply cache; --store aggregates:
tests.simulation.aggregates, an aggregate store of JSON records; by default each seed for each
kind in turn) seed after seed (S, S+1, ...; S random
unless given), each seed a Hypothesis run of --examples examples (tests.simulation.runner),
until N seconds have passed or one fails. A failure prints its seed and the shortest sequence
of events Hypothesis found (with the driver's steps and how the store differs from the truth),
and exits 1; `--seed S --seconds 0` runs that one seed again. By default every event is taken,
the known bugs' too (KNOWN_BUGS in machine.py, CACHE_KNOWN_BUGS in cache.py); --exclude leaves
out the events that reach the ones named (a bug since fixed, FIXED_BUGS, is taken and leaves
nothing out).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence

from tests.simulation.runner import ALL_KNOWN_BUGS, FIXED_BUGS, MACHINES, STEPS, print_failure, run_seed


def main(argv: Sequence[str] | None = None) -> int:
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
    print(f"no failure in {runs} seed(s), {time.monotonic() - began:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
