"""Pieces the benchmarks share: the Zipf corpus, CPU sampling, the machine's description,
waiting for and cleaning up the local stack, and the executor apply with its phases timed.

Nothing here runs at import time. `profiled_partition_applier` is shipped to Spark's Python
workers, which do not have bench/ on their path: scripts that use it register this module
for pickling by value (cloudpickle.register_pickle_by_value).
"""

from __future__ import annotations

import logging
import os
import platform
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent

_log = logging.getLogger("bench.common")
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
    if root is None:
        return 0
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        ticks[pid] = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    total = 0
    for pid in ticks:
        walk = pid
        while walk not in (0, 1, root) and walk in parents:
            walk = parents[walk]
        if walk == root:
            total += ticks[pid]
    return total


def cassandra_pid() -> int | None:
    """The local stack's Cassandra (STATESTORE_STACK_DIR picks the stack), or None."""
    if str(PROJECT / "stack") not in sys.path:
        sys.path.insert(0, str(PROJECT / "stack"))
    try:
        import stack as local_stack

        return local_stack.running_pid("cassandra")
    except Exception:  # noqa: BLE001 - the CPU and memory samples are optional
        return None


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
    from statestore import kafka_io
    from statestore.cassandra import session_for

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
    from statestore.cassandra import DDL_PROFILE

    for attempt in range(3):
        try:
            wait_for_stack(cassandra, kafka, 120)
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", execution_profile=DDL_PROFILE, timeout=120)
            return
        except Exception as exc:  # noqa: BLE001 - a loaded node can time out; try again
            _log.warning("dropping keyspace %s failed (attempt %d): %s", keyspace, attempt + 1, exc)
            time.sleep(5)


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


# --------------------------------------------------------------------------- profiling the apply


def profiled_partition_applier(timers):
    """statestore.apply.partition_applier with its phases timed into `timers` (Spark
    accumulators named read, plan, write, task, slices): the same calls in the same order
    (read_entries, plan_writes, write_entries), each wrapped in a timer."""

    def applier(config, spec, batch_id, write_ts):
        def apply_slice(session, table, deltas):
            from statestore.retry import with_retries

            # Retried like the real apply: repeating a slice is safe (it is replay-safe).
            return with_retries(config, "profiled apply", lambda: timed_apply(session, table, deltas))

        def timed_apply(session, table, deltas):
            from statestore.apply import ApplyStats, plan_writes

            if not deltas:
                return ApplyStats()
            concurrency = config.write_concurrency
            t0 = time.perf_counter()
            current = table.read_entries(session, [d.key for d in deltas], concurrency)
            t1 = time.perf_counter()
            writes, skipped = plan_writes(current, deltas, batch_id)
            t2 = time.perf_counter()
            table.write_entries(session, writes, concurrency, write_ts)
            t3 = time.perf_counter()
            timers["read"].add(t1 - t0)
            timers["plan"].add(t2 - t1)
            timers["write"].add(t3 - t2)
            timers["slices"].add(1)
            times = [d.time_ms for d in deltas if d.time_ms is not None]
            return ApplyStats(len(deltas), len(writes), skipped, max(times) if times else None)

        def apply_partition(rows):
            from statestore.apply import _SLICE, ApplyStats, Delta
            from statestore.cassandra import session_for
            from statestore.stores import table_for

            task_began = time.perf_counter()
            session = session_for(config)
            table = table_for(spec)
            total = ApplyStats()
            deltas = []
            for row in rows:
                deltas.append(Delta(row[0].encode("utf-8"), int(row[1]), row[2]))
                if len(deltas) >= _SLICE:
                    total += apply_slice(session, table, deltas)
                    deltas = []
            total += apply_slice(session, table, deltas)
            timers["task"].add(time.perf_counter() - task_began)
            yield total

        return apply_partition

    return applier
