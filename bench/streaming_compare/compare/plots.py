"""PNG plots of the side-by-side benchmark (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

_COLOURS = {
    "partitioned": "#1b7837",
    "global": "#7fbf7b",
    "partitioned-reads": "#a6dba0",
    "partitioned-nolog": "#5aae61",
    "partitioned-lcs": "#00441b",
    "rocksdb": "#2166ac",
    "hdfs": "#92c5de",
    "stateless": "#999999",
    "write-ceiling": "#d6604d",
    "partitioned-window": "#762a83",
    "rocksdb-window": "#5aae61",
    "partitioned-hopping": "#9970ab",
    "rocksdb-hopping": "#4393c3",
    "partitioned-session": "#c2a5cf",
    "rocksdb-session": "#053061",
    "partitioned-aggregate": "#b35806",
    "rocksdb-aggregate": "#542788",
    "partitioned-window-aggregate": "#e08214",
    "rocksdb-window-aggregate": "#8073ac",
    "batch-counts": "#bababa",
    "batch-counts-window": "#bababa",
    "batch-counts-hopping": "#bababa",
    "batch-counts-session": "#bababa",
}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_throughput(systems: dict, path: Path) -> bool:
    names = [n for n, s in systems.items() if s.get("words_per_s")]
    if not names:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    values = [systems[n]["words_per_s"] for n in names]
    bars = ax.barh([systems[n]["label"] for n in names], values, color=[_COLOURS[n] for n in names])
    for bar, value in zip(bars, values, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {value:,.0f}", va="center", fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("words/s, sustained (higher is better)")
    ax.set_title("Throughput by system")
    ax.set_xlim(0, max(values) * 1.2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_restart(systems: dict, path: Path) -> bool:
    names = [n for n, s in systems.items() if s.get("restart")]
    if not names:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for n in names:
        sizes = sorted(systems[n]["restart"])
        ax.plot(
            sizes, [systems[n]["restart"][k] for k in sizes], marker="o", label=systems[n]["label"], color=_COLOURS[n]
        )
    ax.set_xscale("log")
    ax.set_xlabel("keys in state")
    ax.set_ylabel("seconds until the first new batch committed")
    ax.set_title("Restart time by state size (lower is better)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_latency(systems: dict, path: Path) -> bool:
    names = [n for n, s in systems.items() if (s.get("latency") or {}).get("p50_s") is not None]
    if not names:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [systems[n]["label"] for n in names]
    p50 = [systems[n]["latency"]["p50_s"] for n in names]
    p99 = [systems[n]["latency"]["p99_s"] for n in names]
    ys = range(len(names))
    ax.barh([y - 0.2 for y in ys], p50, height=0.4, label="p50", color=[_COLOURS[n] for n in names])
    ax.barh([y + 0.2 for y in ys], p99, height=0.4, label="p99", color=[_COLOURS[n] for n in names], alpha=0.5)
    ax.set_yticks(list(ys), labels)
    ax.invert_yaxis()
    rate = systems[names[0]]["latency"]["rate_words_per_s"]
    ax.set_xlabel("seconds from Kafka timestamp to batch commit (lower is better)")
    ax.set_title(f"End-to-end latency at {rate:,.0f} words/s (p50 solid, p99 light)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_all(summary: dict, out: Path) -> list[str]:
    """Write every plot the figures allow into `out`; their file names."""
    systems = summary["systems"]
    written = []
    for name, plot in (
        ("throughput.png", plot_throughput),
        ("restart.png", plot_restart),
        ("latency.png", plot_latency),
    ):
        if plot(systems, out / name):
            written.append(name)
    return written
