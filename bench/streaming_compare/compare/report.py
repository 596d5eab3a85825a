"""The side-by-side benchmark's figures, ratios, targets and Markdown report. Pure: it only
reads the workers' result dicts (compare/worker.py), so it is unit-tested on its own."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime

from compare.metrics import percentile, ratio
from compare.systems import BATCH_COUNTS_OF, COUNTERPARTS, LABELS

REFERENCE, CEILING, OURS_MAIN = "rocksdb", "stateless", "partitioned"
WRITE_CEILING, OURS_GLOBAL = "write-ceiling", "global"


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def aggregate(results: list[dict], systems: list[str]) -> dict:
    """Per system: medians over rounds of the throughput figures, the first round's latency,
    restart and profile, peak memory; ratios against RocksDB and the ceiling; the targets."""
    out: dict = {"systems": {}}
    for system in systems:
        runs = [r for r in results if r.get("system") == system]
        tps = [r["throughput"] for r in runs if r.get("throughput")]
        first = next((r for r in runs if r.get("round") == 1), runs[0] if runs else {})
        pooled = [d for t in tps for d in t.get("batch_s", [])[1:]]  # the first batch is start-up
        memory = [r.get("memory", {}) for r in runs]
        out["systems"][system] = {
            "label": LABELS[system],
            "words_per_s": _median(t.get("sustained_words_per_s") for t in tps),
            "words_per_s_runs": [t.get("sustained_words_per_s") for t in tps],
            "overall_words_per_s": _median(t.get("overall_words_per_s") for t in tps),
            "batches": _median(t.get("batches") for t in tps),
            "batch_p50_s": percentile(pooled, 50),
            "batch_p99_s": percentile(pooled, 99),
            "first_batch_s": _median(t.get("first_batch_s") for t in tps),
            "spark_cpu_s": _median(t.get("spark_cpu_s") for t in tps),
            "cassandra_cpu_s": _median(t.get("cassandra_cpu_s") for t in tps),
            # CPU per word: unlike words/s, it hardly moves with what else runs on the machine.
            "words_per_cpu_s": _median(_words_per_cpu_s(t) for t in tps),
            # Spark's process tree alone (driver + executors), Cassandra's CPU counted apart.
            "words_per_spark_cpu_s": _median(_words_per_cpu_s(t, cassandra=False) for t in tps),
            # ... and split by process: the Python driver, Spark's JVM, the Python workers.
            "spark_cpu_by_kind_s": {
                kind: _median(t.get("spark_cpu_by_kind_s", {}).get(kind) for t in tps)
                for kind in ("driver", "jvm", "workers")
            },
            # Of the JVM's: its just-in-time compiler's, a fresh JVM's cost (bench_common.jit_ticks).
            "jit_cpu_s": _median(t.get("jit_cpu_s") for t in tps),
            "words_per_warm_spark_cpu_s": _median(_words_per_cpu_s(t, cassandra=False, jit=False) for t in tps),
            "verified": "; ".join(sorted({str(t.get("verified")) for t in tps})),
            "latency": first.get("latency"),
            "restart": {s["keys"]: s["restart_s"] for s in (first.get("restart") or {}).get("sizes", [])},
            "restart_cold": {
                s["keys"]: s["cold"]["restart_s"]
                for s in (first.get("restart") or {}).get("sizes", [])
                if s.get("cold")
            },
            "restart_detail": (first.get("restart") or {}).get("sizes", []),
            "rss_mb": _peak(memory, "spark_mb", "throughput"),
            "rss_all_mb": _peak(memory, "spark_mb"),
            "cassandra_rss_mb": _peak(memory, "cassandra_mb"),
            "profile": first.get("profile"),
            "session_start_s": first.get("session_start_s"),
            "error": "; ".join(r["error"] for r in runs if r.get("error")) or None,
            "load": [r["load"] for r in runs if r.get("load")],
        }
    add_ratios(out["systems"])
    out["targets"] = targets(out["systems"])
    loads = [load for s in out["systems"].values() for load in s["load"]]
    out["load"] = {
        "loadavg_min": min((x for load in loads for x in load["loadavg"]), default=None),
        "loadavg_max": max((x for load in loads for x in load["loadavg"]), default=None),
        "other_cores_median": _median(load["other_cores"] for load in loads),
        "other_cores_max": max((load["other_cores"] for load in loads), default=None),
    }
    return out


def _words_per_cpu_s(run: dict, cassandra: bool = True, jit: bool = True) -> float | None:
    """Words per CPU-second of the run: Spark's process tree, plus Cassandra's (`cassandra`),
    less the JIT compiler's (not `jit`; None for a run that did not measure it)."""
    if not jit and run.get("jit_cpu_s") is None:
        return None
    cpu = (run.get("spark_cpu_s") or 0) + ((run.get("cassandra_cpu_s") or 0) if cassandra else 0)
    cpu -= 0 if jit else run["jit_cpu_s"]
    return run["words"] / cpu if run.get("words") and cpu > 0 else None


def _peak(memory: list[dict], key: str, phase: str | None = None) -> float | None:
    values = [p[key] for m in memory for name, p in m.items() if (phase is None or name == phase) and p.get(key)]
    return max(values) if values else None


def add_ratios(systems: dict) -> None:
    ref, ceiling = systems.get(REFERENCE, {}), systems.get(CEILING, {})
    writes = systems.get(WRITE_CEILING, {})
    for s in systems.values():
        s["x_rocksdb"] = ratio(s["words_per_s"], ref.get("words_per_s"))
        s["x_ceiling"] = ratio(s["words_per_s"], ceiling.get("words_per_s"))
        s["x_write_ceiling"] = ratio(s["words_per_s"], writes.get("words_per_s"))
        s["spark_cpu_x_rocksdb"] = ratio(s["words_per_spark_cpu_s"], ref.get("words_per_spark_cpu_s"))
        s["cpu_x_rocksdb"] = ratio(s["words_per_cpu_s"], ref.get("words_per_cpu_s"))
        s["cpu_x_ceiling"] = ratio(s["words_per_cpu_s"], ceiling.get("words_per_cpu_s"))
        s["rss_x_rocksdb"] = ratio(s["rss_mb"], ref.get("rss_mb"))
        s["rss_x_ceiling"] = ratio(s["rss_mb"], ceiling.get("rss_mb"))
        lat, ref_lat, ceil_lat = s["latency"] or {}, ref.get("latency") or {}, ceiling.get("latency") or {}
        s["latency_p50_x_rocksdb"] = ratio(lat.get("p50_s"), ref_lat.get("p50_s"))
        s["latency_p50_x_ceiling"] = ratio(lat.get("p50_s"), ceil_lat.get("p50_s"))
        sizes = sorted(s["restart"])
        s["restart_growth"] = ratio(s["restart"][sizes[-1]], s["restart"][sizes[0]]) if len(sizes) > 1 else None
        s["restart_x_rocksdb"] = {k: ratio(v, ref.get("restart", {}).get(k)) for k, v in s["restart"].items()}
        s["cold_x_rocksdb_cold"] = {
            k: ratio(v, ref.get("restart_cold", {}).get(k)) for k, v in s.get("restart_cold", {}).items()
        }
    for ours, theirs in COUNTERPARTS.items():
        if ours in systems and theirs in systems:
            mine, spark = systems[ours], systems[theirs]
            mine["counterpart"] = theirs
            mine["x_counterpart"] = ratio(mine["words_per_s"], spark["words_per_s"])
            mine["spark_cpu_x_counterpart"] = ratio(mine["words_per_spark_cpu_s"], spark["words_per_spark_cpu_s"])
            mine["warm_spark_cpu_x_counterpart"] = ratio(
                mine["words_per_warm_spark_cpu_s"], spark["words_per_warm_spark_cpu_s"]
            )
    for ours, counts in BATCH_COUNTS_OF.items():
        if ours in systems and counts in systems:
            _state_cost(systems, ours, counts)


def _state_cost(systems: dict, ours: str, counts: str) -> None:
    """What the state costs Spark, ours' and its counterpart's: each one's Spark CPU less that
    of Spark counting each batch alone (`counts`, the same read, tokenization and count with no
    state), which every exact store of the kind spends first. `state_spark_cpu_x_counterpart`:
    how many times less ours' state costs than Spark's (higher is better);
    `free_state_spark_cpu_x_counterpart`: the words per Spark CPU-second × Spark's that a store
    whose state cost nothing would reach, the most any store can."""
    floor = systems[counts].get("spark_cpu_s")
    warm_floor = _less(floor, systems[counts].get("jit_cpu_s"))
    mine = systems[ours]
    mine["batch_counts"] = counts
    spark = systems.get(mine.get("counterpart") or "")
    for system in (mine, spark) if spark is not None else (mine,):
        system["state_spark_cpu_s"] = _less(system.get("spark_cpu_s"), floor)
        # The same less each one's JIT compiling: what the state costs a warm JVM.
        system["warm_state_spark_cpu_s"] = _less(_less(system.get("spark_cpu_s"), system.get("jit_cpu_s")), warm_floor)
    if spark is None:
        return
    mine["state_spark_cpu_x_counterpart"] = ratio(spark["state_spark_cpu_s"], mine["state_spark_cpu_s"])
    mine["warm_state_spark_cpu_x_counterpart"] = ratio(spark["warm_state_spark_cpu_s"], mine["warm_state_spark_cpu_s"])
    mine["free_state_spark_cpu_x_counterpart"] = ratio(spark.get("spark_cpu_s"), floor)


def _less(value, minus):
    return None if value is None or minus is None else value - minus


def targets(systems: dict) -> list[dict]:
    """The issue's targets for our partitioned store, each met (True), missed (False) or not
    measured (None), with by how much."""
    ours = systems.get(OURS_MAIN)
    if ours is None:
        return []
    other = systems.get(OURS_GLOBAL) or {}
    out = [
        _target("throughput ≥ 0.5 × Spark's RocksDB store", ours["x_rocksdb"], 0.5, higher_is_better=True),
        _target("throughput ≥ 0.8 × the Cassandra write ceiling", ours["x_write_ceiling"], 0.8, True),
        _target("Spark-side words per CPU-second ≥ 1.0 × RocksDB's", ours["spark_cpu_x_rocksdb"], 1.0, True),
        _target(
            "global store ≥ 0.5 × the partitioned store",
            ratio(other.get("words_per_s"), ours["words_per_s"]),
            0.5,
            higher_is_better=True,
        ),
    ]
    sizes = sorted(ours["restart"])
    if len(sizes) > 1:
        span = f"{sizes[-1]:,} vs {sizes[0]:,} keys"
        out.append(_target(f"restart flat: ≤ 1.5 × as long at {span}", ours["restart_growth"], 1.5, False))
        largest = sizes[-1]
        cold = ours.get("cold_x_rocksdb_cold", {})
        if cold.get(largest) is not None:
            name = f"cold restart ≤ 0.5 × Spark's RocksDB store's cold restart at {largest:,} keys"
            out.append(_target(name, cold[largest], 0.5, False))
        else:
            name = f"restart ≤ 0.5 × Spark's RocksDB store at {largest:,} keys (warm restarts)"
            out.append(_target(name, ours["restart_x_rocksdb"].get(largest), 0.5, False))
    return out


def _target(name: str, value: float | None, limit: float, higher_is_better: bool) -> dict:
    if value is None:
        return {"name": name, "value": None, "limit": limit, "met": None, "by": None}
    met = value >= limit if higher_is_better else value <= limit
    return {"name": name, "value": value, "limit": limit, "met": met, "by": abs(value - limit)}


# --------------------------------------------------------------------------- Markdown


def _num(value, digits: int = 0, suffix: str = "") -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}{suffix}"


def _x(value) -> str:
    return "–" if value is None else f"{value:.2f}×"


def render(machine: dict, corpus: dict, settings: dict, summary: dict, pngs: list[str]) -> str:
    systems = summary["systems"]
    load = summary["load"]
    out = [f"# Streaming side by side ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)", "", "## Machine", ""]
    out += [f"- {k}: {v}" for k, v in machine.items()]
    out += [
        f"- load during the runs: 1-minute load average {_num(load['loadavg_min'], 1)}–{_num(load['loadavg_max'], 1)};"
        f" other processes (not this benchmark) kept {_num(load['other_cores_median'], 2)} cores busy in the median"
        f" worker, {_num(load['other_cores_max'], 2)} at most",
        "",
        "## Input and settings",
        "",
    ]
    out += [f"- {k}: {v:,}" if isinstance(v, int) else f"- {k}: {v}" for k, v in corpus.items()]
    out += [
        f"- maxOffsetsPerTrigger (every system): {settings['max_offsets_per_trigger']:,}",
        f"- command: `{settings['command']}`",
    ]
    if "events" in corpus:
        out.append("- one JSON event per Kafka record: every words/s below is events/s")
    out += ["", "## Throughput (the corpus from the start, available-now)", ""]
    out += [
        "| system | words/s sustained | × RocksDB | × ceiling | × write ceiling | words/s overall | batches "
        "| first batch s | batch p50 s | batch p99 s | CPU s Spark | CPU s Cassandra | check |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in systems.values():
        out.append(
            f"| {s['label']} | {_num(s['words_per_s'])} | {_x(s['x_rocksdb'])} | {_x(s['x_ceiling'])} "
            f"| {_x(s['x_write_ceiling'])} "
            f"| {_num(s['overall_words_per_s'])} | {_num(s['batches'])} | {_num(s['first_batch_s'], 2)} "
            f"| {_num(s['batch_p50_s'], 2)} "
            f"| {_num(s['batch_p99_s'], 2)} | {_num(s['spark_cpu_s'], 1)} | {_num(s['cassandra_cpu_s'], 1)} "
            f"| {s['error'] or s['verified']} |"
        )
    pairs = [s for s in systems.values() if s.get("counterpart")]
    if pairs:
        out += ["", "## Each of ours beside Spark's own operator for the same count (RocksDB)", ""]
        out += [
            "| ours | Spark's | words/s × Spark's | words per Spark CPU-second × Spark's "
            "| Spark CPU s: Python driver / JVM / Python workers (ours; Spark's) "
            "| of the JVM's, JIT compiling s (ours; Spark's) | the same less JIT compiling × Spark's |",
            "|---|---|---:|---:|---|---|---:|",
        ]
        for s in pairs:
            spark = systems[s["counterpart"]]
            split = "; ".join(
                " / ".join(_num((x.get("spark_cpu_by_kind_s") or {}).get(k), 1) for k in ("driver", "jvm", "workers"))
                for x in (s, spark)
            )
            jit = "; ".join(_num(x.get("jit_cpu_s"), 1) for x in (s, spark))
            warm = _x(s.get("warm_spark_cpu_x_counterpart"))
            out.append(
                f"| {s['label']} | {spark['label']} | {_x(s['x_counterpart'])} "
                f"| {_x(s['spark_cpu_x_counterpart'])} | {split} | {jit} | {warm} |"
            )
    costed = [s for s in systems.values() if s.get("batch_counts") and s.get("counterpart")]
    if costed:
        out += ["", "## What the state costs Spark: Spark CPU less Spark counting each batch alone", ""]
        out += [
            "| ours | each batch alone, Spark CPU s | ours' state, s | Spark's state, s "
            "| ours' state × Spark's (less is more) | words per Spark CPU-second × Spark's, state free "
            "| less JIT compiling: ours' state, s | Spark's state, s | ours' × Spark's |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in costed:
            spark = systems[s["counterpart"]]
            out.append(
                f"| {s['label']} | {_num(systems[s['batch_counts']].get('spark_cpu_s'), 1)} "
                f"| {_num(s['state_spark_cpu_s'], 1)} | {_num(spark['state_spark_cpu_s'], 1)} "
                f"| {_x(s['state_spark_cpu_x_counterpart'])} | {_x(s['free_state_spark_cpu_x_counterpart'])} "
                f"| {_num(s['warm_state_spark_cpu_s'], 1)} | {_num(spark['warm_state_spark_cpu_s'], 1)} "
                f"| {_x(s['warm_state_spark_cpu_x_counterpart'])} |"
            )
    out += ["", "## CPU cost (the throughput run: Spark's process tree + Cassandra)", ""]
    out += [
        "| system | words per CPU-second | × RocksDB | × ceiling | words per Spark CPU-second | × RocksDB "
        "| Spark CPU s: Python driver / JVM / Python workers |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for s in systems.values():
        kinds = s.get("spark_cpu_by_kind_s") or {}
        split = " / ".join(_num(kinds.get(kind), 1) for kind in ("driver", "jvm", "workers"))
        out.append(
            f"| {s['label']} | {_num(s['words_per_cpu_s'])} | {_x(s['cpu_x_rocksdb'])} | {_x(s['cpu_x_ceiling'])} "
            f"| {_num(s['words_per_spark_cpu_s'])} | {_x(s['spark_cpu_x_rocksdb'])} | {split} |"
        )
    rate = next((s["latency"]["rate_words_per_s"] for s in systems.values() if s["latency"]), None)
    out += ["", f"## End-to-end latency at {_num(rate)} words/s ({settings.get('trigger')} trigger)", ""]
    out += [
        "| system | p50 s | p99 s | max s | p50 × RocksDB | p50 × ceiling | batch p50 s | records | all read |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in systems.values():
        lat = s["latency"] or {}
        out.append(
            f"| {s['label']} | {_num(lat.get('p50_s'), 2)} | {_num(lat.get('p99_s'), 2)} | {_num(lat.get('max_s'), 2)} "
            f"| {_x(s['latency_p50_x_rocksdb'])} | {_x(s['latency_p50_x_ceiling'])} "
            f"| {_num(lat.get('batch_p50_s'), 2)} "
            f"| {_num(lat.get('records'))} | {'yes' if lat.get('complete') else 'no' if lat else '–'} |"
        )
    out += ["", "## Peak memory (resident set size, MiB)", ""]
    out += [
        "| system | Spark tree, throughput run | × RocksDB | × ceiling | Spark tree, all phases | Cassandra |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s in systems.values():
        out.append(
            f"| {s['label']} | {_num(s['rss_mb'])} | {_x(s['rss_x_rocksdb'])} | {_x(s['rss_x_ceiling'])} "
            f"| {_num(s['rss_all_mb'])} | {_num(s['cassandra_rss_mb'])} |"
        )
    sizes = sorted({k for s in systems.values() for k in s["restart"]})
    out += ["", "## Restart time (stop, start from the checkpoint, first new batch committed), seconds", ""]
    out.append(
        "| system | " + " | ".join(f"{k:,} keys" for k in sizes) + " | largest ÷ smallest | × RocksDB at largest |"
    )
    out.append("|---|" + "---:|" * (len(sizes) + 2))
    for s in systems.values():
        if not s["restart"]:
            continue
        cells = " | ".join(_num(s["restart"].get(k), 2) for k in sizes)
        out.append(
            f"| {s['label']} | {cells} | {_x(s['restart_growth'])} | {_x(s['restart_x_rocksdb'].get(sizes[-1]))} |"
        )
    colds = sorted({k for s in systems.values() for k in s.get("restart_cold", {})})
    if colds:
        out += ["", "Cold restarts (a new SparkSession first: no executor state, no loaded store), seconds:", ""]
        out.append("| system | " + " | ".join(f"{k:,} keys" for k in colds) + " | × RocksDB cold at largest |")
        out.append("|---|" + "---:|" * (len(colds) + 1))
        for s in systems.values():
            if s.get("restart_cold"):
                cells = " | ".join(_num(s["restart_cold"].get(k), 2) for k in colds)
                out.append(f"| {s['label']} | {cells} | {_x(s['cold_x_rocksdb_cold'].get(colds[-1]))} |")
    out += ["", "## Targets (our partitioned store)", ""]
    for t in summary["targets"]:
        verdict = "not measured" if t["met"] is None else "**met**" if t["met"] else f"**missed** by {t['by']:.2f}"
        out.append(f"- {t['name']}: {_x(t['value'])} — {verdict}")
    for s in systems.values():
        if s.get("profile"):
            from compare.profile import profile_lines

            out += ["", *profile_lines(s["label"], s["profile"])]
    out += ["", *[f"![{name}]({name})" for name in pngs]]
    return "\n".join(out) + "\n"
