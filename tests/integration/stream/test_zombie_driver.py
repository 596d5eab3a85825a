"""A zombie driver: the whole job frozen (SIGSTOP) in the middle of a batch's writes for longer
than its lease, a second driver from the same checkpoint takes over and finishes the topic, then
the first wakes up (SIGCONT). Fencing refuses everything it tries to record, its late writes
lose against the newer ones, and the counts equal the ground truth exactly."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from statestore.store.book import registry
from statestore.stream.faults import ENV as FAULT_ENV
from tests.corpus import generate
from tests.integration.conftest import dump, produce_lines, spark_submit_job, wait_for

LEASE_TTL_S = "6"
PAUSED_BATCH = 1


def _launch(name: str, topic, store, checkpoint, keyspace, fault: str, batch_lines: int) -> subprocess.Popen:
    log = open(checkpoint.parent / f"{name}.log", "w")
    return spark_submit_job(
        *("--topic", topic, "--store", store, "--checkpoint", str(checkpoint), "--keyspace", keyspace),
        *("--max-offsets-per-trigger", str(batch_lines), "--lease-ttl", LEASE_TTL_S),
        env={FAULT_ENV: fault},
        start_new_session=True,  # its own session: every process of the job can be found and resumed
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    members.append(int(entry))
            except (ProcessLookupError, PermissionError):
                continue
    return members


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


# Batches of 2,000 records are applied by the executors' Python workers, which freeze the job;
# batches of 500 (under --driver-apply-records' 1,000) by the driver, which freezes itself.
@pytest.mark.parametrize(("batch_lines", "applied_on"), [(2_000, "executors"), (500, "driver")])
def test_a_paused_driver_is_fenced_off_and_counts_stay_exact(
    session, keyspace, kafka_config, topic, store_name, tmp_path, batch_lines, applied_on
):
    lines, truth = generate(6 * batch_lines, seed=4242)
    produce_lines(kafka_config, topic, lines)
    checkpoint = tmp_path / "cp"
    fault = f"pause-mid-write:{PAUSED_BATCH}"
    zombie = _launch("zombie", topic, store_name, checkpoint, keyspace, fault, batch_lines)
    try:
        # The job freezes itself after writing half of batch PAUSED_BATCH.
        wait_for(lambda: _stopped(zombie.pid), 300, "the first driver to freeze mid-write")
        frozen = registry.progress(session, keyspace, store_name)
        assert frozen.pending_batch_id == PAUSED_BATCH and frozen.last_batch_id == PAUSED_BATCH - 1

        # A second driver from the same checkpoint waits out the frozen one's lease, takes
        # over with a newer epoch, replays the half-written batch and reads the topic to its end.
        successor = _launch("successor", topic, store_name, checkpoint, keyspace, "", batch_lines)
        assert successor.wait(timeout=600) == 0, (checkpoint.parent / "successor.log").read_text()[-3000:]
        done = registry.progress(session, keyspace, store_name)
        assert done.epoch > frozen.epoch and done.last_batch_id > PAUSED_BATCH
        assert dump(session, keyspace, store_name) == dict(truth)

        # The zombie wakes up, finishes writing its batch and tries to record it: refused.
        for pid in _session_members(zombie.pid):
            os.kill(pid, signal.SIGCONT)
        code = zombie.wait(timeout=300)
        log = (checkpoint.parent / "zombie.log").read_text(errors="replace")
        assert code == 2, log[-3000:]  # a store error stopped it (docs/streaming-job.md)
        assert f"fenced off while recording batch {PAUSED_BATCH}" in log, log[-3000:]
        assert (
            f"batch {PAUSED_BATCH - 1} (spark {PAUSED_BATCH - 1}) of store {store_name}, applied on the {applied_on}"
            in log
        )
        after = registry.progress(session, keyspace, store_name)
        assert (after.last_batch_id, after.offsets, after.epoch) == (done.last_batch_id, done.offsets, done.epoch)
        assert dump(session, keyspace, store_name) == dict(truth)
    finally:
        _end_session(zombie.pid)


def _end_session(pid: int) -> None:
    """Wake and kill every process of the session `pid` leads (a frozen job and its workers)."""
    for member in _session_members(pid):
        try:
            os.kill(member, signal.SIGCONT)
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.5)
