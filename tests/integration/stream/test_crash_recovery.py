"""Hard crashes: SIGKILL the whole job again and again, restart from the same checkpoint,
and the counts still equal the ground truth exactly."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

from statestore.store.book import deadletters, registry
from statestore.stream.faults import ENV as FAULT_ENV
from tests.corpus import generate
from tests.integration.conftest import dump, produce_lines, spark_submit_job, wait_for

PROJECT = Path(__file__).resolve().parents[3]
RANDOM_KILLS = 4
FORCED_KILLS = 4  # inside a batch's writes, through the test-only fault switch
BATCH_LINES = 10_000


def _launch(topic, store, checkpoint, keyspace, fault: str | None, *job_args: str) -> subprocess.Popen:
    # A session of its own: killing its process group is a crash of driver, executors and
    # Python workers together, as when a machine dies.
    log = open(checkpoint.parent / "job.log", "a")
    return spark_submit_job(
        "--topic",
        topic,
        "--store",
        store,
        "--checkpoint",
        str(checkpoint),
        "--keyspace",
        keyspace,
        "--max-offsets-per-trigger",
        str(BATCH_LINES),
        # Renewed every third of it: 10 s rides out a stalled Cassandra under load.
        "--lease-ttl",
        "10",
        *job_args,
        env={FAULT_ENV: fault or ""},
        start_new_session=True,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _failure(checkpoint) -> str:
    lines = (checkpoint.parent / "job.log").read_text(errors="replace").splitlines()
    return "\n".join(line for line in lines if "wordcount_stream:" in line or "Error" in line)[-4000:]


def launch_and_kill_at_random(launch, session, keyspace, store, rng: random.Random) -> subprocess.Popen:
    """`launch()` the job and SIGKILL its whole session at a random moment once it has changed
    the store's progress (its lease taken, or a batch begun): inside a batch's writes, between
    batches or while Spark commits one. A kill while Spark starts up (10-30 s, by the machine)
    would test nothing the store sees. The store must exist."""
    before = registry.progress(session, keyspace, store)
    proc = launch()
    wait_for(lambda: registry.progress(session, keyspace, store) != before or proc.poll() is not None, 300, "a start")
    time.sleep(rng.uniform(0.0, 6.0))
    os.killpg(proc.pid, signal.SIGKILL)
    return proc


def test_sigkill_at_random_moments_and_inside_writes_keeps_counts_exact(
    session, keyspace, kafka_config, topic, store_name, tmp_path
):
    """Over 120 s (about 160 s on a quiet CI machine) because it is nine job starts: eight
    SIGKILLs of the whole job (four inside a batch's writes, four at random moments once a batch
    runs) and a final run, each paying Spark's start-up, over a corpus of a million words so the
    kills land in multi-batch, multi-task applies rather than in trivially small ones."""
    lines, truth = generate(170_000, seed=2026)
    assert sum(truth.values()) >= 1_000_000
    produce_lines(kafka_config, topic, lines)
    checkpoint = tmp_path / "cp"
    rng = random.Random(20261122)
    # The forced kills come first, each inside the batch after the last one's (the launch
    # replays the batch left pending, then dies writing its target): late in the plan, the job
    # may have used up the input before a forced kill had a batch to stop inside.
    plan = ["forced"] * FORCED_KILLS + ["random"] * RANDOM_KILLS
    forced_hits = 0
    for kind in plan:
        target = forced_hits  # forced kill i stops inside batch i
        if kind == "random":  # the forced kills came first: the store exists
            launch = lambda: _launch(topic, store_name, checkpoint, keyspace, None)  # noqa: E731
            proc = launch_and_kill_at_random(launch, session, keyspace, store_name, rng)
        else:
            proc = _launch(topic, store_name, checkpoint, keyspace, f"kill-mid-write:{target}")
        proc.wait(timeout=600)
        assert proc.returncode in (-signal.SIGKILL, 0), _failure(checkpoint)
        if kind == "forced":
            assert proc.returncode == -signal.SIGKILL, f"no batch {target} to stop inside"
            progress = registry.progress(session, keyspace, store_name)
            # It died after starting its target batch and before finishing it: mid-write.
            assert progress.pending_batch_id == target
            assert progress.last_batch_id == (target - 1 if target > 0 else None)
            forced_hits += 1
    final = _launch(topic, store_name, checkpoint, keyspace, None)
    final.wait(timeout=900)
    assert final.returncode == 0, _failure(checkpoint)
    assert dump(session, keyspace, store_name) == dict(truth)
    assert list(deadletters.read_all(session, keyspace, store_name)) == []
