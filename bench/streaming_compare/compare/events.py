"""The aggregate benchmark's input (`streaming_compare.py --aggregate`, make bench-aggregate):
JSON events of Zipf-distributed users, each with an amount and an event time, the ground truths
of count, sum and max per user and per user and tumbling window, and the check of what a system
kept against them. Pure: no Spark, no I/O, so it is unit-tested on its own.

An event is one Kafka record, `{"user":"u0000042","amount":1234.25,"ts":1793750400000}`. The
amounts are multiples of 0.25 below 10,000, so every sum of them is exact in a double (far
below 2^53 quarters) whatever order a system adds them in: a kept sum must equal the truth's
exactly, not within a tolerance. The event times step evenly over `span_ms` from a fixed start
(November 2026), in produce order: the same corpus from the same seed on any day.

Per window (`window_truth_of`): each event counts in the one tumbling window of its event time,
windows aligned to the epoch as ours (`--window`) and Spark's `window()` align them. Every event
of the corpus is on time for both systems when the partitions are read in step (the run produces
them round-robin): the truth counts every event, and a system that dropped one as late differs.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping

# The measures our job keeps (--aggregate) and the fields it reads (--key, --time-field); Spark's
# own query computes the same with count(1), sum(amount), max(amount) per user.
MEASURES = "n=count(), total=sum(amount), hi=max(amount)"
KEY_FIELD, AMOUNT_FIELD, TIME_FIELD = "user", "amount", "ts"
START_MS = 1_793_750_400_000  # 2026-11-01 00:00 UTC
QUARTERS = 40_000  # amounts 0.25 .. 9,999.75

# Per user: (count, sum, max), the order of MEASURES.
Truth = dict[str, tuple[int, float, float]]
# Per (user, window start in epoch ms): (count, sum, max).
WindowTruth = dict[tuple[str, int], tuple[int, float, float]]


def user_name(rank: int) -> str:
    """The user of Zipf rank `rank` (0: the most frequent)."""
    return f"u{rank:07d}"


def generate_events(
    n_events: int, users: int, zipf_s: float, seed: int, span_ms: int = 3_600_000, start_ms: int = START_MS
) -> tuple[list[bytes], Truth]:
    """`n_events` JSON events (rank r of `users` has weight 1/r**zipf_s) and the ground truth
    computed from them: per user the number of events, the sum and the max of their amounts."""
    if n_events < 0 or users <= 0:
        raise ValueError("give a non-negative number of events and at least one user")
    rng = random.Random(seed)
    cumulative: list[float] = []
    total = 0.0
    for rank in range(1, users + 1):
        total += 1.0 / rank**zipf_s
        cumulative.append(total)
    picks = rng.choices(range(users), cum_weights=cumulative, k=n_events)
    quarters = [rng.randrange(1, QUARTERS) for _ in range(n_events)]
    counts: dict[int, int] = {}
    sums: dict[int, int] = {}  # in quarters: integers, exact
    highs: dict[int, int] = {}
    lines: list[bytes] = []
    step = span_ms / max(n_events, 1)
    for i, (rank, q) in enumerate(zip(picks, quarters, strict=True)):
        event = {KEY_FIELD: user_name(rank), AMOUNT_FIELD: q / 4, TIME_FIELD: start_ms + int(i * step)}
        lines.append(json.dumps(event, separators=(",", ":")).encode("ascii"))
        counts[rank] = counts.get(rank, 0) + 1
        sums[rank] = sums.get(rank, 0) + q
        highs[rank] = max(highs.get(rank, 0), q)
    truth = {user_name(r): (counts[r], sums[r] / 4, highs[r] / 4) for r in counts}
    return lines, truth


def truth_of(lines: list[bytes]) -> Truth:
    """The ground truth recomputed from the events themselves, by brute force (the check of
    generate_events; floats added in produce order, exact for these amounts)."""
    out: dict[str, list] = {}
    for line in lines:
        event = json.loads(line)
        n, total, high = out.get(event[KEY_FIELD], (0, 0.0, float("-inf")))
        out[event[KEY_FIELD]] = [n + 1, total + event[AMOUNT_FIELD], max(high, event[AMOUNT_FIELD])]
    return {user: tuple(values) for user, values in out.items()}


def window_truth_of(lines: list[bytes], window_ms: int) -> WindowTruth:
    """The ground truth per user and tumbling window of `window_ms` (aligned to the epoch), by
    brute force over the events: each event in the window starting at ts - ts % window_ms.
    Sums are added in quarters (integers), exact whatever the order."""
    counts: dict[tuple[str, int], list[int]] = {}
    for line in lines:
        event = json.loads(line)
        ts, quarters = event[TIME_FIELD], round(event[AMOUNT_FIELD] * 4)
        slot = counts.setdefault((event[KEY_FIELD], ts - ts % window_ms), [0, 0, 0])
        slot[0] += 1
        slot[1] += quarters
        slot[2] = max(slot[2], quarters)
    return {key: (n, total / 4, high / 4) for key, (n, total, high) in counts.items()}


def check_aggregates(system: str, kept: Mapping[str, tuple], truth: Mapping[str, tuple], limit: int = 5) -> str:
    """What `system` kept per user, (count, sum, max), against the truth: exact equality of
    every value (count as an integer, sum and max as doubles) and the same users. Raises
    AssertionError naming the first `limit` differences; returns a line saying what matched."""
    return _check(system, kept, truth, "users", str, limit)


def check_window_aggregates(
    system: str, kept: Mapping[tuple[str, int], tuple], truth: Mapping[tuple[str, int], tuple], limit: int = 5
) -> str:
    """What `system` kept per (user, window start), (count, sum, max), against the window truth,
    exactly, as check_aggregates does per user: the same pairs, the same values."""
    return _check(system, kept, truth, "(user, window) pairs", lambda key: f"{key[0]} at {key[1]}", limit)


def _check(system: str, kept: Mapping, truth: Mapping, what: str, name, limit: int) -> str:
    missing = [k for k in truth if k not in kept]
    extra = [k for k in kept if k not in truth]
    wrong = [k for k, values in truth.items() if k in kept and tuple(kept[k]) != tuple(values)]
    if missing or extra or wrong:
        parts = []
        if wrong:
            sample = "; ".join(f"{name(k)}: {tuple(kept[k])} for {tuple(truth[k])}" for k in wrong[:limit])
            parts.append(f"{len(wrong)} {what}' (count, sum, max) differ ({sample})")
        if missing:
            parts.append(f"{len(missing)} {what} missing ({', '.join(map(name, missing[:limit]))})")
        if extra:
            parts.append(f"{len(extra)} {what} not in the input ({', '.join(map(name, extra[:limit]))})")
        raise AssertionError(f"{system}: of {len(truth)} {what}, " + "; ".join(parts))
    return f"all {len(truth)} {what}' count, sum and max equal the ground truth"


def truth_to_json(truth: Truth) -> dict[str, list]:
    return {user: list(values) for user, values in truth.items()}


def truth_from_json(data: Mapping[str, list]) -> Truth:
    return {user: (int(n), float(total), float(high)) for user, (n, total, high) in data.items()}


def window_truth_to_json(truth: WindowTruth) -> list[list]:
    """As rows [user, window start, count, sum, max] (JSON objects have no tuple keys)."""
    return [[user, start, *values] for (user, start), values in truth.items()]


def window_truth_from_json(rows: list[list]) -> WindowTruth:
    return {(user, int(start)): (int(n), float(total), float(high)) for user, start, n, total, high in rows}
