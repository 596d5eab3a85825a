"""What else the machine is doing: the report `.ci/run` prints before and after the tests.

    python3 stack/machine.py report              load, memory, and this project's servers already
                                                 running (from any checkout); says BUSY if so
    python3 stack/machine.py sample FILE         append /proc/loadavg and /proc/stat every 5 s
                                                 until killed (run it in the background)
    python3 stack/machine.py summary FILE [TIMES]  the load and CPU split (user, system, idle,
                                                 iowait, steal) over the sampled run, and the
                                                 lanes' times that `make test` wrote to TIMES

The suite's time is the machine's: the same tests took 27 minutes on a quiet machine and 67 beside
a cluster and benchmarks left running. A run that starts on a busy machine says so in its first
lines, and its end says what the cores did meanwhile. Plain Python (no venv: CI prints this
before anything is installed), Linux /proc only.
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# The main classes and commands of the project's servers, from any checkout.
SERVER_PATTERNS = {
    "cassandra": re.compile(r"org\.apache\.cassandra\.service\.CassandraDaemon"),
    "kafka": re.compile(r"\bkafka\.Kafka\b"),
    "spark master": re.compile(r"org\.apache\.spark\.deploy\.master\.Master"),
    "spark worker": re.compile(r"org\.apache\.spark\.deploy\.worker\.Worker"),
    "spark job": re.compile(r"org\.apache\.spark\.deploy\.SparkSubmit"),
    "airflow": re.compile(r"airflow (api-server|scheduler|dag-processor|triggerer)"),
    "statestore serve": re.compile(r"statestore serve\b"),
    "prometheus": re.compile(r"(^|/)prometheus\s"),
}
# The ports the stacks listen on (stack.py, cluster.py, two_dc.py, scripts/airflow, serve).
STACK_PORTS = {
    9042: "single-node Cassandra",
    9092: "single-node Kafka",
    9093: "single-node Kafka controller",
    9142: "cluster Cassandra",
    9192: "cluster Kafka",
    9193: "cluster Kafka controller",
    9242: "two-dc Cassandra",
    7077: "Spark master",
    18080: "Spark master UI",
    18081: "Spark worker 1 UI",
    18082: "Spark worker 2 UI",
    8080: "Airflow or statestore serve",
}
SAMPLE_EVERY_S = 5
# Above this share of the cores busy over the second the report measures, it says BUSY. The CPU
# share, not the 1-minute load average: that one still shows a run that just ended for a minute.
BUSY_CPU_SHARE = 0.5


@dataclass(frozen=True)
class Server:
    pid: int
    what: str
    cpu_s: float
    age_s: float
    command: str


def _clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def _uptime_s() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def _process(pid: int) -> tuple[str, float, float] | None:
    """(command line, CPU seconds, age in seconds) of a live process, or None."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = _clock_ticks()
    cpu_s = (int(fields[11]) + int(fields[12])) / ticks
    age_s = _uptime_s() - int(fields[19]) / ticks
    return raw.replace(b"\0", b" ").decode(errors="replace").strip(), cpu_s, age_s


def _listening_inodes() -> dict[int, int]:
    """socket inode -> port, for every TCP socket listening on one of STACK_PORTS."""
    inodes: dict[int, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            port = int(parts[1].rsplit(":", 1)[1], 16)
            if parts[3] == "0A" and port in STACK_PORTS:  # 0A: LISTEN
                inodes[int(parts[9])] = port
    return inodes


def _pids() -> list[int]:
    return sorted(int(name) for name in os.listdir("/proc") if name.isdigit())


def _ports_of(pid: int, inodes: dict[int, int]) -> list[int]:
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return []
    return sorted(
        {inodes[int(link[8:-1])] for link in links if link.startswith("socket:[") and int(link[8:-1]) in inodes}
    )


def project_servers() -> list[Server]:
    """Every process that is one of the project's servers, by its main class or by a stack port."""
    inodes = _listening_inodes()
    found = []
    me = os.getpid()
    for pid in _pids():
        if pid == me:
            continue
        process = _process(pid)
        if process is None:
            continue
        command, cpu_s, age_s = process
        names = [name for name, pattern in SERVER_PATTERNS.items() if pattern.search(command)]
        ports = _ports_of(pid, inodes) if inodes else []
        names += [f"{STACK_PORTS[port]} port {port}" for port in ports if not names]
        if names:
            found.append(Server(pid, ", ".join(names), cpu_s, age_s, command))
    return found


def _memory_mb() -> tuple[int, int]:
    info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return int(info["MemTotal"].split()[0]) // 1024, int(info["MemAvailable"].split()[0]) // 1024


def _where(command: str) -> str:
    """The folder a server's files are in, as its command line tells (its checkout or stack dir)."""
    match = re.search(r"(/[^\s:=]+?)/(\.stack|\.venv)/", command) or re.search(r"(/[^\s:=]+?)/stack/", command)
    return match.group(1) if match else "?"


def report() -> int:
    load = os.getloadavg()
    cores = os.cpu_count() or 1
    total_mb, available_mb = _memory_mb()
    servers = project_servers()
    before = _cpu_times()
    top = _top(5)  # over one second
    after = _cpu_times()
    split = cpu_split(before, after)
    share = (100 - split["idle"] - split["iowait"]) / 100
    busy = share > BUSY_CPU_SHARE or servers
    verdict = "BUSY" if busy else "quiet"
    print(
        f"machine: {verdict}: {share * 100:.0f}% of {cores} cores busy over the last second, load "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {available_mb:,} of {total_mb:,} MB memory available"
    )
    if servers:
        print(f"machine: {len(servers)} of this project's servers already run (they share the cores with this run):")
        for server in servers:
            print(
                f"  pid {server.pid:>7}  {server.what:<28} up {server.age_s / 60:6.1f} min, "
                f"{server.cpu_s:8.1f} CPU-s  from {_where(server.command)}"
            )
        print("machine: stop them with `make stop-all` in the checkout that started them")
    elif busy:
        print("machine: no server of this project runs, but something else holds the cores:")
    if busy:
        for line in top:
            print(f"  {line}")
    return 0


def _top(count: int) -> list[str]:
    """The processes that used the most CPU over the last second."""
    before = {pid: p[1] for pid in _pids() if (p := _process(pid))}
    time.sleep(1)
    rows = []
    for pid in _pids():
        process = _process(pid)
        if process and process[0] and pid in before:  # kernel threads have no command line
            rows.append((process[1] - before[pid], pid, process[0]))
    rows.sort(reverse=True)
    return [f"pid {pid:>7}  {used * 100:5.0f}% CPU  {command[:110]}" for used, pid, command in rows[:count]]


def _cpu_times() -> list[int]:
    """user, nice, system, idle, iowait, irq, softirq, steal (clock ticks, all cores)."""
    return [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]


# The CPU split the report and the summary give: /proc/stat's columns (_cpu_times) per share.
_SPLIT = {"user": (0, 1), "system": (2, 5, 6), "idle": (3,), "iowait": (4,), "steal": (7,)}


def cpu_split(before: list[int], after: list[int]) -> dict[str, float]:
    """The percent of CPU time between two _cpu_times readings that went to user, system,
    idle, iowait and steal."""
    used = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(used) or 1
    return {name: sum(used[i] for i in columns) * 100 / total for name, columns in _SPLIT.items()}


def sample(path: Path) -> int:
    with path.open("a") as out:
        while True:
            load = Path("/proc/loadavg").read_text().split()
            out.write(f"{time.time():.0f} {load[0]} {' '.join(map(str, _cpu_times()))}\n")
            out.flush()
            time.sleep(SAMPLE_EVERY_S)


def summary(path: Path, times: Path | None) -> int:
    if times is not None and times.exists():
        print("lanes (seconds):")
        for line in times.read_text().splitlines():
            print(f"  {line}")
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    if len(rows) < 2:
        print("machine: too few samples for a summary")
        return 0
    loads = [float(row[1]) for row in rows]
    share = cpu_split([int(v) for v in rows[0][2:]], [int(v) for v in rows[-1][2:]])
    minutes = (int(rows[-1][0]) - int(rows[0][0])) / 60
    print(
        f"machine over the run ({minutes:.1f} min, {len(rows)} samples): load mean {sum(loads) / len(loads):.2f}, "
        f"max {max(loads):.2f} on {os.cpu_count()} cores; CPU "
        + ", ".join(f"{name} {value:.0f}%" for name, value in share.items())
    )
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["report"]:
        return report()
    if argv[:1] == ["sample"] and len(argv) == 2:
        return sample(Path(argv[1]))
    if argv[:1] == ["summary"] and len(argv) in (2, 3):
        return summary(Path(argv[1]), Path(argv[2]) if len(argv) == 3 else None)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
