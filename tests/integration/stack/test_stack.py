"""The local stack script: idempotent start, clean stop by pid, clear errors."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from tests.integration.conftest import free_port, run_stack

PROJECT = Path(__file__).resolve().parents[3]


def _alive(pid: int) -> bool:
    """True for a live process; an exited one awaiting its reaper (a zombie) is not alive."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_up_on_a_running_stack_is_a_no_op(stack):
    pids = {n: (PROJECT / ".stack" / "run" / f"{n}.pid").read_text() for n in ("cassandra", "kafka")}
    result = run_stack("up")
    assert result.returncode == 0, result.stderr
    assert "cassandra: already running" in result.stdout and "kafka: already running" in result.stdout
    assert {n: (PROJECT / ".stack" / "run" / f"{n}.pid").read_text() for n in pids} == pids
    assert run_stack("status").returncode == 0


def test_a_taken_port_is_a_clear_error(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_stack(
            "up",
            "--only",
            "kafka",
            env={"STATESTORE_STACK_DIR": str(tmp_path), "STATESTORE_KAFKA_PORT": str(port)},
        )
    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 (Kafka broker) is already taken" in result.stderr
    assert "STATESTORE_KAFKA_PORT" in result.stderr


def _second_kafka_env(stack_dir: Path) -> dict[str, str]:
    """The settings of a second Kafka in its own stack dir (sharing the jars) on free ports."""
    (stack_dir / "lib").mkdir()
    (stack_dir / "lib" / "kafka").symlink_to(PROJECT / ".stack" / "lib" / "kafka")
    return {
        "STATESTORE_STACK_DIR": str(stack_dir),
        "STATESTORE_KAFKA_PORT": str(free_port()),
        "STATESTORE_KAFKA_CONTROLLER_PORT": str(free_port()),
    }


def test_a_second_kafka_starts_answers_and_stops_by_pid(tmp_path):
    env = _second_kafka_env(tmp_path)
    try:
        up = run_stack("up", "--only", "kafka", env=env)
        assert up.returncode == 0, up.stdout + up.stderr
        pid = int((tmp_path / "run" / "kafka.pid").read_text())
        assert _alive(pid)
        assert run_stack("status", "--only", "kafka", env=env).returncode == 0
    finally:
        down = run_stack("down", "--only", "kafka", env=env)
    assert "kafka: stopped" in down.stdout
    assert not _alive(pid)
    assert run_stack("status", "--only", "kafka", env=env).returncode == 1


def test_stop_all_stops_what_this_stack_dir_started_and_the_report_saw_it(tmp_path):
    """`make stop-all`'s stack part: every server with a recorded pid stopped, the machine report
    naming it while it ran (as .ci/run's first lines would)."""
    env = _second_kafka_env(tmp_path)
    try:
        up = run_stack("up", "--only", "kafka", env=env)
        assert up.returncode == 0, up.stdout + up.stderr
        pid = int((tmp_path / "run" / "kafka.pid").read_text())
        report = subprocess.run(
            ["python3", str(PROJECT / "stack" / "machine.py"), "report"], capture_output=True, text=True, timeout=60
        )
        assert report.stdout.startswith("machine: BUSY"), report.stdout
        assert f"pid {pid:>7}  kafka" in report.stdout, report.stdout
    finally:
        stopped = run_stack("stop-all", env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.splitlines() == ["kafka: stopped"]
    assert not _alive(pid)
    again = run_stack("stop-all", env=env)
    assert again.stdout.strip() == f"stack: nothing of {tmp_path} was running"


def test_with_stack_leaves_a_running_stack_running_and_passes_the_exit_code_on(stack):
    pids = {n: (PROJECT / ".stack" / "run" / f"{n}.pid").read_text() for n in ("cassandra", "kafka")}
    result = subprocess.run(
        [str(PROJECT / "scripts" / "with-stack"), "sh", "-c", "echo ran; exit 3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 3, result.stderr
    assert result.stdout == "ran\n"
    assert {n: (PROJECT / ".stack" / "run" / f"{n}.pid").read_text() for n in pids} == pids
    assert all(_alive(int(pid)) for pid in pids.values())


def test_kafka_keeps_records_whatever_their_event_time(stack, kafka_config):
    """Tests produce records timestamped days back; time-based retention would delete their
    segments (the active one included) between producing and reading them."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": kafka_config.bootstrap_servers})
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([broker])[broker].result(timeout=30)
    assert configs["log.retention.ms"].value == "-1"
