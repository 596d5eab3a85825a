"""The session recount's pure part against a brute-force split of one key's event times."""

import random

import pytest

from statestore.maintenance.validate.recount_windows import sessions_with_counts


def brute_force(times: list[int], gap: int) -> list[tuple[int, int, int]]:
    out, run = [], []
    for t in sorted(times):
        if run and t - run[-1] > gap:
            out.append((run[0], run[-1], len(run)))
            run = []
        run.append(t)
    return out + ([(run[0], run[-1], len(run))] if run else [])


@pytest.mark.parametrize("seed", range(30))
def test_sessions_and_their_event_counts_match_a_brute_force_split(seed):
    rng = random.Random(seed)
    gap = rng.choice([1, 5, 30])
    times = [rng.randrange(0, 300) for _ in range(rng.randint(1, 60))]  # duplicates included
    assert sessions_with_counts(times, gap) == brute_force(times, gap)


def test_events_exactly_a_gap_apart_share_a_session():
    assert sessions_with_counts([10, 0, 20, 31], 10) == [(0, 20, 3), (31, 31, 1)]
