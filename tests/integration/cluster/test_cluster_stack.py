"""The cluster mode of scripts/stack as operators and tests use it: every process listed as
JSON, one process stopped and started by name, unknown names refused."""

from __future__ import annotations

import json
import subprocess

from tests.integration.conftest import PROJECT

STACK = [str(PROJECT / "scripts" / "stack")]
NAMES = {f"{kind}-{i}" for kind in ("cassandra", "kafka") for i in (1, 2, 3)} | {
    "spark-master",
    "spark-worker-1",
    "spark-worker-2",
}


def _stack(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*STACK, *args], capture_output=True, text=True, timeout=300)


def _rows() -> dict[str, dict]:
    result = _stack("status", "--nodes", "3", "--json")
    return {row["name"]: row for row in json.loads(result.stdout)}, result.returncode


def test_status_lists_every_process_and_stop_start_take_one_down_and_up(restore_cluster):
    rows, code = _rows()
    assert code == 0 and set(rows) == NAMES
    assert all(set(row) == {"name", "address", "pid", "state"} for row in rows.values())
    assert {rows[f"cassandra-{i}"]["address"] for i in (1, 2, 3)} == {"127.0.0.1", "127.0.0.2", "127.0.0.3"}
    assert all(row["state"] == "running" and isinstance(row["pid"], int) for row in rows.values())

    assert _stack("stop", "kafka-3").returncode == 0
    rows, code = _rows()
    assert code == 1 and rows["kafka-3"]["state"] == "stopped" and rows["kafka-3"]["pid"] is None
    assert rows["kafka-2"]["state"] == "running"
    started = _stack("start", "kafka-3")
    assert started.returncode == 0, started.stderr
    rows, code = _rows()
    assert code == 0 and rows["kafka-3"]["state"] == "running"


def test_an_unknown_process_name_is_refused_with_the_known_ones(cluster):
    result = _stack("stop", "cassandra-9")
    assert result.returncode == 2
    assert "no cluster process is called 'cassandra-9'" in result.stderr and "spark-worker-2" in result.stderr
