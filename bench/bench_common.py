"""What the benchmarks share (every bench/<benchmark>/ and bench/micro/ script): the Zipf
corpus, CPU sampling, the machine's description, the local stack's processes, waiting for and
cleaning up the stack, and the clocks that time a batch through statestore's seams
(statestore.stream.writer.BatchSeams).

Named bench_common, not common: the entry scripts import it as a top-level module (each puts
bench/ on Python's module search path beside its own folder; pytest's pythonpath does the
same), where a name as plain as `common` could be shadowed by, or shadow, an installed
distribution's top-level package.

Nothing here runs at import time, and nothing here is shipped to Spark's executors: the
executor-side timer is statestore's own AccumulatorTimer.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import platform
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent

_log = logging.getLogger("bench.common")

PUBLISH_ENV = "STATESTORE_BENCH_PUBLISH"


def results_dir(benchmark: str, *parts: str) -> Path:
    """Where a benchmark writes its raw results: .stack/bench-results/<benchmark>/ (git-ignored),
    or bench/results/<benchmark>/, the committed runs BENCHMARKS.md cites, when the environment
    asks to publish (STATESTORE_BENCH_PUBLISH set and not 0: `make bench* PUBLISH=1`)."""
    publish = os.environ.get(PUBLISH_ENV, "").strip() not in ("", "0")
    base = PROJECT / "bench" / "results" if publish else PROJECT / ".stack" / "bench-results"
    return base.joinpath(benchmark, *parts)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_SEPARATORS = (" ", " ", " ", ", ", ". ", "; ", " - ", "\t")


# --------------------------------------------------------------------------- the corpus


def make_vocabulary(size: int, rng: random.Random) -> list[str]:
    """`size` distinct lower-case ASCII words of 2-12 letters (short ones are the frequent ones,
    as in natural text: rank 1 gets the shortest word)."""
    words: set[str] = set()
    ordered: list[str] = []
    while len(ordered) < size:
        length = min(12, 2 + int(rng.expovariate(1 / 4.5)) + len(ordered) * 4 // max(size, 1))
        word = "".join(rng.choice(_LETTERS) for _ in range(length))
        if word not in words:
            words.add(word)
            ordered.append(word)
    return ordered


def generate(
    n_words: int, vocab_size: int, zipf_s: float, words_per_line: int, seed: int
) -> tuple[list[bytes], Counter]:
    """Lines of Zipf-distributed words (rank r has weight 1/r**s), some upper- or title-cased,
    joined by separators; and the count of every (lower-cased) word, the ground truth."""
    lines, _counts, truth = generate_with_counts(n_words, vocab_size, zipf_s, words_per_line, seed)
    return lines, truth


def generate_with_counts(
    n_words: int, vocab_size: int, zipf_s: float, words_per_line: int, seed: int
) -> tuple[list[bytes], list[int], Counter]:
    """As `generate`, plus the number of words of each line (what the tokenizer finds in it:
    separators hold no letters or digits)."""
    rng = random.Random(seed)
    vocabulary = make_vocabulary(vocab_size, rng)
    cumulative: list[float] = []
    total = 0.0
    for rank in range(1, vocab_size + 1):
        total += 1.0 / rank**zipf_s
        cumulative.append(total)
    picks = rng.choices(range(vocab_size), cum_weights=cumulative, k=n_words)
    truth = Counter(vocabulary[i] for i in picks)
    lines: list[bytes] = []
    counts: list[int] = []
    at = 0
    while at < n_words:
        n = min(n_words - at, rng.randint(1, 2 * words_per_line - 1))
        parts = []
        for i in picks[at : at + n]:
            word = vocabulary[i]
            casing = rng.random()
            parts.append(word.upper() if casing < 0.05 else word.title() if casing < 0.15 else word)
            parts.append(rng.choice(_SEPARATORS))
        lines.append("".join(parts).encode("utf-8"))
        counts.append(n)
        at += n
    return lines, counts, truth


def zipf_rank_of(vocab_size: int, zipf_s: float, share: float) -> int:
    """How many top-ranked words cover `share` of all occurrences (for the report)."""
    weights = [1.0 / r**zipf_s for r in range(1, vocab_size + 1)]
    total = sum(weights)
    cumulative = 0.0
    for rank, w in enumerate(weights, 1):
        cumulative += w
        if cumulative >= share * total:
            return rank
    return vocab_size


# --------------------------------------------------------------------------- CPU sampling


def cpu_ticks_of(pid: int | None) -> int:
    """CPU jiffies (user + system) of one process."""
    if pid is None:
        return 0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def process_tree_ticks(root: int | None) -> int:
    """CPU jiffies (user + system, with reaped children's) of `root` and its live descendants."""
    return sum(process_tree_ticks_by_kind(root).values())


def process_tree_ticks_by_kind(root: int | None, proc: Path = Path("/proc")) -> dict[str, int]:
    """process_tree_ticks split by kind of process: `root` itself ("driver"), Java processes
    ("jvm": a PySpark driver's Spark JVM) and every other descendant ("workers": Spark's Python
    workers and their daemon, with the workers they reaped)."""
    kinds = {"driver": 0, "jvm": 0, "workers": 0}
    for pid, (name, ticks) in _process_tree(root, proc).items():
        kinds["driver" if pid == root else "jvm" if name == "java" else "workers"] += ticks
    return kinds


# HotSpot's just-in-time compiler threads ("C1 CompilerThread0", "C2 CompilerThread0", ...).
_JIT_THREAD = re.compile(r"C[12] CompilerThre")


def jit_ticks(root: int | None, proc: Path = Path("/proc")) -> int:
    """CPU jiffies (user + system) of the just-in-time compiler threads of the Java processes
    under `root` (a PySpark driver's Spark JVM): a part of their "jvm" CPU that a fresh JVM
    spends compiling its hot code, and a JVM that has run the same work for a while no longer
    does. Compiler threads live as long as their JVM here (one of each tier on a two-core
    machine: HotSpot adds and removes them only above one per tier)."""
    total = 0
    for pid, (name, _ticks) in _process_tree(root, proc).items():
        if name != "java":
            continue
        for task in (proc / str(pid) / "task").glob("*/stat"):
            parsed = _stat(task)
            if parsed is not None and _JIT_THREAD.match(parsed[0]):
                total += sum(int(f) for f in parsed[1][11:13])  # utime, stime
    return total


def _stat(path: Path) -> tuple[str, list[str]] | None:
    """(name, the fields after it) of a /proc stat file; None when it is gone or unreadable."""
    try:
        name, rest = path.read_text().split(" (", 1)[1].rsplit(")", 1)
    except (OSError, ValueError):
        return None
    return name, rest.split()


def _process_tree(root: int | None, proc: Path) -> dict[int, tuple[str, int]]:
    """`root` and its live descendants: pid -> (name, CPU jiffies with reaped children's)."""
    if root is None:
        return {}
    parents: dict[int, int] = {}
    found: dict[int, tuple[str, int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        parsed = _stat(entry / "stat")
        if parsed is None:
            continue
        name, fields = parsed
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        found[pid] = (name, sum(int(f) for f in fields[11:15]))  # utime, stime, cutime, cstime
    tree = {}
    for pid, value in found.items():
        walk = pid
        while walk not in (0, 1, root) and walk in parents:
            walk = parents[walk]
        if walk == root:
            tree[pid] = value
    return tree


@functools.cache
def _local_stack():
    """stack/stack_common.py (the local stack's processes, not a package; it imports nothing of
    stack/) loaded from its file."""
    spec = importlib.util.spec_from_file_location("bench_local_stack", PROJECT / "stack" / "stack_common.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while it loads
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[spec.name]
        raise
    return module


def stack_pid(name: str) -> int | None:
    """The pid of the local stack's `name` (cassandra, kafka; STATESTORE_STACK_DIR picks the
    stack) if it runs, else None."""
    try:
        return _local_stack().running_pid(name)
    except Exception:  # noqa: BLE001 - the CPU, load and memory samples are optional
        return None


def cassandra_pid() -> int | None:
    """The local stack's Cassandra, or None."""
    return stack_pid("cassandra")


# --------------------------------------------------------------------------- the machine


def machine_description(spark_version: str | None = None, session=None) -> dict[str, str]:
    """CPU, memory, OS and the versions of everything measured (for the report)."""
    import cassandra
    import pyspark

    def stderr_of(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False).stderr.strip()
        except OSError:
            return "?"

    java = stderr_of("java", "-version").splitlines()
    cassandra_version = "?"
    if session is not None:
        try:
            cassandra_version = session.execute("SELECT release_version FROM system.local").one().release_version
        except Exception:  # noqa: BLE001 - informational only
            pass
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
    )
    kafka_jars = sorted((PROJECT / ".stack" / "lib" / "kafka").glob("kafka-clients-*.jar"))
    return {
        "cpus (nproc)": str(os.cpu_count()),
        "cpu model": cpu,
        "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": java[0] if java else "?",
        "spark (pyspark)": f"{spark_version or '?'} ({pyspark.__version__})",
        "cassandra": cassandra_version,
        "kafka": kafka_jars[-1].stem.removeprefix("kafka-clients-") if kafka_jars else "?",
        "cassandra-driver": cassandra.__version__,
    }


# --------------------------------------------------------------------------- the stack


def wait_for_stack(cassandra, kafka, timeout_s: float) -> None:
    """Wait until Cassandra and Kafka both answer (other users may be restarting a shared
    stack), or raise after `timeout_s`."""
    from statestore.conn import kafka as kafka_io
    from statestore.conn.cassandra import session_for

    deadline = time.monotonic() + timeout_s
    waited = False
    while True:
        try:
            session_for(cassandra).execute("SELECT release_version FROM system.local", timeout=10)
            kafka_io.partition_count(kafka, "bench-probe")
            if waited:
                _log.info("the stack answers again")
            return
        except Exception as exc:
            if time.monotonic() > deadline:
                raise
            if not waited:
                _log.warning("waiting for the stack to answer: %s", str(exc).splitlines()[0][:200])
                waited = True
            time.sleep(3)


def drop_keyspace(session, keyspace: str, cassandra, kafka) -> None:
    from statestore.conn.cassandra import DDL_PROFILE

    for attempt in range(3):
        try:
            wait_for_stack(cassandra, kafka, 120)
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", execution_profile=DDL_PROFILE, timeout=120)
            return
        except Exception as exc:  # noqa: BLE001 - a loaded node can time out; try again
            _log.warning("dropping keyspace %s failed (attempt %d): %s", keyspace, attempt + 1, exc)
            time.sleep(5)


def wait_until_idle(pid: int | None, idle_cores: float = 0.1, limit_s: float = 600.0) -> float:
    """Wait until process `pid` uses under `idle_cores` of a core over a second (at most
    `limit_s`; at once when there is no such process); the seconds waited."""
    began = time.perf_counter()
    if pid is None:
        return 0.0
    per_s = os.sysconf("SC_CLK_TCK")
    while time.perf_counter() - began < limit_s:
        before = cpu_ticks_of(pid)
        time.sleep(1.0)
        if (cpu_ticks_of(pid) - before) / per_s < idle_cores:
            break
    return time.perf_counter() - began


@contextlib.contextmanager
def scratch_keyspace(keyspace: str):
    """(config, session) on the local stack with `keyspace` made for one benchmark and dropped
    after it, also when the benchmark fails."""
    from statestore.conn.cassandra import DDL_PROFILE, create_keyspace, session_for
    from statestore.core.config import CassandraConfig, resolve

    config = resolve(CassandraConfig, overrides={"keyspace": keyspace})
    session = session_for(config)
    create_keyspace(session, keyspace)
    try:
        yield config, session
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", execution_profile=DDL_PROFILE, timeout=120)


def fresh_run(benchmark: str, keyspace: str):
    """(work folder, Cassandra settings, Kafka settings, session) for one run of a benchmark
    that keeps its keyspace for a look afterwards: its folder under .stack/bench/ emptied, and
    `keyspace` dropped and made anew on the local stack."""
    import shutil

    from statestore.conn.cassandra import DDL_PROFILE, create_keyspace, session_for
    from statestore.core.config import CassandraConfig, KafkaConfig, resolve

    workdir = PROJECT / ".stack" / "bench" / benchmark
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    cassandra = resolve(CassandraConfig, overrides={"keyspace": keyspace})
    session = session_for(cassandra)
    session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", execution_profile=DDL_PROFILE, timeout=300)
    create_keyspace(session, keyspace)
    return workdir, cassandra, resolve(KafkaConfig), session


def delete_topics(kafka, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    if not topics:
        return
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})  # keep it alive until done
    futures = admin.delete_topics(topics, operation_timeout=30)
    for topic, future in futures.items():
        try:
            future.result(timeout=30)
        except Exception as exc:  # noqa: BLE001 - report and go on cleaning
            _log.warning("could not delete topic %s: %s", topic, exc)


# --------------------------------------------------------------------------- timing a batch


class StepClock:
    """A driver-side Timer (statestore.stream.apply.Timer) for BatchSeams.driver_timer: adds
    each step's seconds to `totals` under the label `labels` gives the library's step name
    ("lease check", "apply_batch", ...); steps without a label are not kept."""

    def __init__(self, labels: Mapping[str, str], totals: Counter | None = None) -> None:
        self.labels = labels
        self.totals = Counter() if totals is None else totals

    def __call__(self, phase: str, seconds: float) -> None:
        label = self.labels.get(phase)
        if label is not None:
            self.totals[label] += seconds


def executor_timers(spark_context, names) -> tuple[dict, object]:
    """A Spark accumulator per phase name, and the AccumulatorTimer over them (for
    BatchSeams.task_timer: it travels with the apply's tasks to the executors)."""
    from statestore.stream.apply import AccumulatorTimer

    accumulators = {name: spark_context.accumulator(0.0) for name in names}
    return accumulators, AccumulatorTimer(accumulators)


def settle_compactions(nodetool, keyspace: str, table: str, limit_s: float = 1800) -> float:
    """Flush, then wait until Cassandra has no compaction pending or running, so a phase is not
    measured against the previous one's background work; returns the seconds waited."""
    if nodetool is None:
        return 0.0
    began = time.monotonic()
    nodetool.flush(keyspace, table)
    while time.monotonic() - began < limit_s:
        stats = nodetool.run("compactionstats")
        pending = re.search(r"pending tasks\s+(\d+)", stats)
        if pending and int(pending.group(1)) == 0 and "compaction type" not in stats.lower():
            break
        time.sleep(5)
    return round(time.monotonic() - began, 1)
