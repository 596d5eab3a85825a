"""The machine report `.ci/run` prints: it finds the project's servers by main class and by the
stacks' ports, says BUSY when one runs, and sums the sampled run's load and CPU split."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(PROJECT / "stack"))

import machine  # noqa: E402  (stack/ is a folder of scripts, put on the path above)


@pytest.fixture
def pretend_cassandra():
    """A process whose command line names Cassandra's main class, as a real node's does."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "org.apache.cassandra.service.CassandraDaemon"]
    )
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def test_a_server_is_found_by_its_main_class(pretend_cassandra):
    found = {server.pid: server for server in machine.project_servers()}
    assert pretend_cassandra in found
    assert found[pretend_cassandra].what == "cassandra"


def test_a_listener_on_a_stack_port_is_found_by_its_port(monkeypatch):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        monkeypatch.setitem(machine.STACK_PORTS, port, "a test's port")
        process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(listener.fileno(),))
        try:
            found = {server.pid: server.what for server in machine.project_servers()}
        finally:
            process.kill()
            process.wait()
    assert found.get(process.pid) == f"a test's port port {port}"


def test_the_report_says_busy_and_names_a_running_server(pretend_cassandra, capsys):
    machine.report()
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("machine: BUSY: ") and "cores busy over the last second, load " in first
    assert f"pid {pretend_cassandra:>7}  cassandra" in out
    assert "make stop-all" in out


def test_the_summary_sums_the_cpu_split_and_the_load(tmp_path, capsys):
    # user nice system idle iowait irq softirq steal, in ticks since boot
    samples = tmp_path / "samples.txt"
    now = int(time.time())
    samples.write_text(f"{now} 1.00 100 0 50 800 10 0 0 40\n{now + 300} 3.00 700 0 150 900 10 0 0 240\n")
    times = tmp_path / "times.txt"
    times.write_text("first lane 1500\nsecond lane 1400\n")
    machine.summary(samples, times)
    out = capsys.readouterr().out
    # used: user 600, system 100, idle 100, iowait 0, steal 200 of 1000 ticks
    assert "first lane 1500" in out and "second lane 1400" in out
    assert "(5.0 min, 2 samples): load mean 2.00, max 3.00" in out
    assert "user 60%, system 10%, idle 10%, iowait 0%, steal 20%" in out
