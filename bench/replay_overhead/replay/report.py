"""The replay-overhead benchmark's report (replay_overhead.py): each variant's medians,
the ratio of each replay-safe variant to its baseline, and where the time of a profiled run
went, as Markdown. Pure: it reads RunResults only.
"""

from __future__ import annotations

import statistics

from replay import PAIRS
from replay.runs import RunResult


def summarize(results: list[RunResult], variants: list[str]) -> dict[str, dict]:
    summary = {}
    for v in variants:
        runs = [r for r in results if r.variant == v]
        summary[v] = {
            "runs": len(runs),
            "words_per_s": [round(r.words_per_s) for r in runs],
            "median_words_per_s": statistics.median(r.words_per_s for r in runs),
            "median_wall_s": statistics.median(r.wall_s for r in runs),
            "median_trigger_s": statistics.median(r.trigger_s for r in runs),
            "median_words_per_trigger_s": statistics.median(r.words_per_trigger_s for r in runs),
            "median_spark_cpu_s": statistics.median(r.spark_cpu_s for r in runs),
            "median_cassandra_cpu_s": statistics.median(r.cassandra_cpu_s for r in runs),
            "median_machine_busy_s": statistics.median(r.machine_busy_s for r in runs),
            "load_before": [round(r.load_before, 1) for r in runs],
        }
    ratios = {}
    for safe, base in PAIRS:
        if safe not in summary or base not in summary:
            continue
        # The runs of a round are neighbours in time: their ratio sees the same background.
        rounds: dict[int, dict[str, RunResult]] = {}
        for r in results:
            rounds.setdefault(r.round, {})[r.variant] = r
        per_round = [p[safe].words_per_s / p[base].words_per_s for p in rounds.values() if safe in p and base in p]
        a, b = summary[safe], summary[base]
        ratios[f"{safe}/{base}"] = {
            "of_medians": a["median_words_per_s"] / b["median_words_per_s"],
            "of_medians_trigger": a["median_words_per_trigger_s"] / b["median_words_per_trigger_s"],
            "per_round": per_round,
            "median_per_round": statistics.median(per_round),
            "cpu_per_word": (a["median_spark_cpu_s"] + a["median_cassandra_cpu_s"])
            / (b["median_spark_cpu_s"] + b["median_cassandra_cpu_s"]),
        }
    if ratios:
        summary["ratios"] = ratios
    return summary


def markdown(summary: dict, profiles: dict, budget: float) -> str:
    out = [
        "| variant | words/s (median) | each run, words/s | wall s | in batches s | CPU s: Spark | CPU s: Cassandra "
        "| machine busy s | load avg before each run |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for v, s in summary.items():
        if v == "ratios":
            continue
        out.append(
            f"| {v} | {s['median_words_per_s']:,.0f} | {', '.join(f'{x:,}' for x in s['words_per_s'])} "
            f"| {s['median_wall_s']:.1f} | {s['median_trigger_s']:.1f} | {s['median_spark_cpu_s']:.1f} "
            f"| {s['median_cassandra_cpu_s']:.1f} | {s['median_machine_busy_s']:.1f} "
            f"| {', '.join(str(x) for x in s['load_before'])} |"
        )
    for pair, ratio in summary.get("ratios", {}).items():
        overhead = 1 - ratio["of_medians"]
        worst = max(overhead, 1 - ratio["median_per_round"])
        verdict = "MET" if worst <= budget else f"MISSED by {worst - budget:.1%} points"
        out.append("")
        out.append(
            f"{pair} throughput: **{ratio['of_medians']:.3f}** (medians of wall-time throughput); "
            f"per round {', '.join(f'{x:.3f}' for x in ratio['per_round'])} (median {ratio['median_per_round']:.3f}); "
            f"{ratio['of_medians_trigger']:.3f} by the sum of triggerExecution; CPU (Spark + Cassandra) per word "
            f"{ratio['cpu_per_word']:.3f}x the baseline's."
        )
        out.append(
            f"overhead {overhead:+.1%} (ratio of medians), {1 - ratio['median_per_round']:+.1%} (median of the "
            f"rounds' ratios), against a budget of {budget:.0%}: **{verdict}**"
        )
    for variant, prof in profiles.items():
        out.append("")
        out.extend(profile_lines(variant, prof))
    return "\n".join(out)


def profile_lines(variant: str, prof: RunResult) -> list[str]:
    """Where the wall time of one profiled run went: Spark's trigger phases, the driver's
    steps inside foreachBatch, and the executor-side apply's phases."""
    d, t, sp = prof.driver, prof.timers, prof.spark_durations
    out = [
        f"profile of one {variant} run: {prof.wall_s:.1f}s wall, {prof.words_per_s:,.0f} words/s, "
        f"{prof.batches} batches, Cassandra CPU {prof.cassandra_cpu_s:.1f}s, machine busy {prof.machine_busy_s:.1f}s "
        f"(of {2 * prof.wall_s:.1f} core-seconds on 2 cores)"
    ]
    out.append(f"  - Spark triggerExecution, summed over batches: {sp.get('triggerExecution', 0):.1f}s")
    for part in ("latestOffset", "queryPlanning", "getBatch", "walCommit", "commitOffsets"):
        if sp.get(part):
            out.append(f"    - {part}: {sp[part]:.2f}s")
    out.append(f"    - addBatch (our foreachBatch): {sp.get('addBatch', 0):.1f}s")
    named = ("lease check", "checkpoint offsets", "first batch start offsets (driver job)")
    for label in named:
        if label in d:
            out.append(f"      - {label}: {d[label]:.2f}s")
    apply = d.get("apply_batch", 0.0)
    out.append(f"      - apply_batch: {apply:.1f}s")
    inner = ("registry begin_batch", "dead letters (driver job)", "registry record_batch")
    for label in inner:
        if label in d:
            out.append(f"        - {label}: {d[label]:.2f}s")
    job = apply - sum(d.get(label, 0.0) for label in inner)
    out.append(f"        - the apply job (Kafka read, tokenize, aggregate, shuffle, apply): {job:.1f}s")
    task = t.get("task", 0.0)
    out.append(f"          - executor apply, summed over tasks: {task:.1f}s ({int(t.get('slices', 0))} slices)")
    phases = [(n, t[n]) for n in ("read", "plan", "group", "write") if t.get(n)]
    labels = {
        "read": "read-before-write (read_entries)",
        "plan": "plan_writes",
        "group": "partition + build batches",
        "write": "counter writes" if variant.startswith("counter") else "write_entries",
    }
    for name, value in phases:
        out.append(f"            - {labels[name]}: {value:.2f}s")
    rest = task - sum(v for _, v in phases)
    out.append(f"            - rows in from the shuffle + Delta decode: {rest:.2f}s")
    return out
