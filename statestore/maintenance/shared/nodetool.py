"""nodetool, Cassandra's JMX tool: what the node says about a table, flushes and compactions.

Where it comes from (`NodetoolConfig.command`):
  - "auto" (default): `nodetool` on PATH, else the local stack's cassandra-all jars run with
    the JPMS options Cassandra needs on Java 17 (class org.apache.cassandra.tools.NodeTool);
  - "off": never (reports then rely on system_views and system.size_estimates);
  - any other text: the command line to run, e.g. "/opt/cassandra/bin/nodetool -u admin -pw secret".
JMX host and port are added as -h/-p unless the command already sets them.

On a cluster each node answers for itself over its own JMX: with `--nodetool-hosts` (every
node's host:port) the maintenance jobs ask every node and combine the answers
(statestore.maintenance.shared.node_figures), and flushes and compactions run on every node.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from statestore.core.errors import NodetoolError
from statestore.core.settings import parse_port, parse_positive_float, setting

PROJECT = Path(__file__).resolve().parents[3]
_CLI_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m")
_MAIN_CLASS = "org.apache.cassandra.tools.NodeTool"
# nodetool logs DEBUG lines to stdout without a logback file of its own; this one keeps
# stdout for the command's answer.
_QUIET_LOGBACK = (
    '<configuration><appender name="ERR" class="ch.qos.logback.core.ConsoleAppender">'
    "<target>System.err</target><encoder><pattern>%msg%n</pattern></encoder></appender>"
    '<root level="WARN"><appender-ref ref="ERR"/></root></configuration>'
)


@dataclass(frozen=True)
class NodetoolConfig:
    """nodetool: how maintenance jobs reach Cassandra's JMX."""

    command: str = setting(
        "auto",
        "STATESTORE_NODETOOL",
        "--nodetool",
        "'auto' (nodetool on PATH, else the local stack's jars), 'off', or the command line to run",
    )
    jmx_host: str = setting(
        "127.0.0.1", "STATESTORE_CASSANDRA_JMX_HOST", "--jmx-host", "Cassandra JMX host (default 127.0.0.1)"
    )
    jmx_port: int = setting(
        7199, "STATESTORE_CASSANDRA_JMX_PORT", "--jmx-port", "Cassandra JMX port (default 7199)", parse_port
    )
    jmx_hosts: str | None = setting(
        None,
        "STATESTORE_NODETOOL_HOSTS",
        "--nodetool-hosts",
        "every node's JMX as host:port,host:port,... (default: --jmx-host and --jmx-port, one node)",
        lambda raw: ",".join(_parse_hosts(raw)),
    )
    timeout_s: float = setting(
        1800.0,
        "STATESTORE_NODETOOL_TIMEOUT",
        "--nodetool-timeout",
        "seconds one nodetool command may take (default 1800: compactions are slow)",
        parse_positive_float,
    )


def _parse_hosts(raw: str) -> list[str]:
    """host:port entries, each checked (pure)."""
    hosts = [entry.strip() for entry in raw.split(",") if entry.strip()]
    if not hosts:
        raise ValueError("name at least one host:port")
    for entry in hosts:
        host, _, port = entry.rpartition(":")
        if not host:
            raise ValueError(f"{entry!r} is not host:port")
        parse_port(port)
    return hosts


def _stack_jars() -> Path | None:
    state = Path(os.environ.get("STATESTORE_STACK_DIR", PROJECT / ".stack"))
    for lib in (state / "lib" / "cassandra", PROJECT / ".stack" / "lib" / "cassandra"):
        if any(lib.glob("cassandra-all-*.jar")):
            return lib
    return None


def _jpms_options() -> list[str]:
    options = PROJECT / "stack" / "jvm17-server.options"
    if not options.is_file():
        return []
    lines = (line.strip() for line in options.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


class Nodetool:
    """Runs nodetool commands; every method raises NodetoolError with the tool's own message."""

    def __init__(self, argv: list[str], timeout_s: float, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.timeout_s = timeout_s
        self.env = env

    @classmethod
    def locate(cls, config: NodetoolConfig):
        """The nodetool `config` asks for (every node's, with `jmx_hosts`), or None when it is off or
        nowhere to be found."""
        if config.jmx_hosts:
            from statestore.maintenance.shared.node_figures import EveryNode

            found = []
            for entry in config.jmx_hosts.split(","):
                host, _, port = entry.rpartition(":")
                one = cls.locate(dataclasses.replace(config, jmx_hosts=None, jmx_host=host, jmx_port=int(port)))
                if one is None:
                    return None
                found.append((entry, one))
            return EveryNode(found)
        target = ["-h", config.jmx_host, "-p", str(config.jmx_port)]
        command = config.command.strip()
        if command == "off":
            return None
        if command != "auto":
            argv = shlex.split(command)
            return cls(argv if "-p" in argv or "--port" in argv else [*argv, *target], config.timeout_s)
        on_path = shutil.which("nodetool")
        if on_path:
            return cls([on_path, *target], config.timeout_s)
        jars, java = _stack_jars(), shutil.which("java")
        if jars is None or java is None:
            return None
        logback = Path(tempfile.gettempdir()) / "statestore-nodetool-logback.xml"
        if not logback.exists():
            logback.write_text(_QUIET_LOGBACK)
        # A CLI that lives a second or two: C1 alone, the serial collector and a small heap cost
        # about half the CPU of the JVM's server defaults (the maintenance jobs start it often).
        argv = [java, *_CLI_JVM_OPTIONS, *_jpms_options(), f"-Dlogback.configurationFile={logback.as_uri()}"]
        argv += ["-cp", f"{jars}/*", _MAIN_CLASS, *target]
        return cls(argv, config.timeout_s)

    def describe(self) -> str:
        """The command without the JVM options, for reports."""
        return " ".join(a for a in self.argv if not a.startswith(("-D", "--add-", "-X")))

    def run(self, *args: str) -> str:
        try:
            done = subprocess.run(
                [*self.argv, *args], capture_output=True, text=True, timeout=self.timeout_s, env=self.env
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NodetoolError(f"nodetool {' '.join(args)} did not complete: {exc}") from None
        if done.returncode != 0:
            detail = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise NodetoolError(
                f"nodetool {' '.join(args)} failed (exit {done.returncode}): {detail[0] if detail else 'no output'}. "
                "Check that Cassandra's JMX port is reachable (STATESTORE_CASSANDRA_JMX_PORT / --jmx-port), or "
                "turn nodetool off with --nodetool off"
            )
        return done.stdout

    def tablestats(self, keyspace: str, table: str) -> dict:
        """`nodetool tablestats -F json` of one table: Cassandra's own figures, flushed data only."""
        return self.tablestats_of([(keyspace, table)])[(keyspace, table)]

    def tablestats_of(self, tables: list[tuple[str, str]], replication: int = 1) -> dict[tuple[str, str], dict]:
        """tablestats of several (keyspace, table) pairs in one call (each call starts a JVM);
        `replication` matters only to EveryNode (one node's figures are its own)."""
        out = self.run("tablestats", "-F", "json", *(f"{k}.{t}" for k, t in tables))
        try:
            stats = json.loads(out[out.index("{") :])
            return {(k, t): stats[k]["tables"][t] for k, t in tables}
        except (ValueError, KeyError) as exc:
            raise NodetoolError(f"unexpected tablestats output for {tables}: {exc}") from None

    def partition_size_percentiles(self, keyspace: str, table: str) -> dict[str, int]:
        """Partition size in bytes by percentile ('50%', ..., 'Min', 'Max') from tablehistograms."""
        return parse_histograms(self.run("tablehistograms", keyspace, table), "Partition Size")

    def flush(self, keyspace: str, *tables: str) -> None:
        self.run("flush", keyspace, *tables)

    def compact(self, keyspace: str, table: str) -> None:
        """A major compaction of the table (purges droppable tombstones past gc_grace_seconds)."""
        self.run("compact", keyspace, table)

    def garbagecollect(self, keyspace: str, table: str) -> None:
        """Single-SSTable compactions that drop shadowed data and droppable tombstones."""
        self.run("garbagecollect", keyspace, table)


_ROW = re.compile(r"^(\d+%|Min|Max)\s+(.*)$")


def parse_histograms(text: str, column: str) -> dict[str, int]:
    """One column of `nodetool tablehistograms` output, by row label (pure)."""
    lines = text.splitlines()
    header = next((line for line in lines if column in line), None)
    if header is None:
        raise NodetoolError(f"no '{column}' column in tablehistograms output")
    names = [n.strip() for n in re.split(r"\s{2,}", header.strip()) if n.strip()]
    index = names.index(column) - 1  # the first header cell names the row labels
    values: dict[str, int] = {}
    for line in lines:
        match = _ROW.match(line.strip())
        if match:
            cells = match.group(2).split()
            if len(cells) > index:
                values[match.group(1)] = round(float(cells[index]))
    return values
