"""The session recount's pure part against a brute-force split of one key's event times, and a
paned store's windows composed in Spark SQL against statestore.core.windows.compose_windows."""

import datetime as dt
import random

import pytest

from statestore.core.windows import WindowSpec, compose_windows
from statestore.maintenance.validate.recount_windows import sessions_with_counts, windows_of


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


@pytest.mark.parametrize("windowing", [WindowSpec(60_000, 20_000, panes=True), WindowSpec(60_000, 25_000, panes=True)])
def test_a_paned_stores_windows_composed_in_spark_equal_compose_windows(spark, windowing):
    rng = random.Random(windowing.hop_ms)
    rows = {}
    for _ in range(300):
        key = rng.choice("abcde")
        pane = windowing.pane_of(rng.randrange(0, 600_000))
        opened = list(windowing.windows_of_row(pane, 0))
        from_start = rng.choice([opened[0], *opened[1:]]) if rng.random() < 0.3 else opened[0]
        rows[(key, pane, from_start)] = (rng.randint(1, 9), rng.randint(0, 50), pane + rng.randrange(windowing.pane_ms))
    frame = spark.createDataFrame(
        [
            (0, key, pane, start, value, batch, dt.datetime.fromtimestamp(t / 1000, dt.UTC))
            for (key, pane, start), (value, batch, t) in rows.items()
        ],
        "partition int, key string, pane_start long, from_start long, value long, batch_id long, time timestamp",
    )
    composed = {
        (r.key, r.window_start): (r.value, r.batch_id, round(r.time.timestamp() * 1000))
        for r in windows_of(frame, windowing).collect()
    }
    truth = {}
    for key in "abcde":
        mine = [(p, f, (v, b, t)) for (k, p, f), (v, b, t) in rows.items() if k == key]
        for start, merged in compose_windows(
            windowing, mine, lambda vs: (sum(v for v, _, _ in vs), max(b for _, b, _ in vs), max(t for _, _, t in vs))
        ):
            truth[(key, start)] = merged
    assert composed == truth
