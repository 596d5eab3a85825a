"""Spark and Kafka processes lost under a running stream: a worker (and its executor) killed
mid-batch, the leader broker of a partition killed, and a driver frozen past its lease while a
second one takes over. Counts are checked exactly against the ground truth every time."""

from __future__ import annotations

import os
import signal
import time

from cassandra import ConsistencyLevel
from confluent_kafka.admin import AdminClient

from statestore.conn.kafka import TopicIds
from statestore.stream.faults import ENV as FAULT_ENV
from tests.corpus import generate
from tests.integration.cluster.conftest import (
    count_difference,
    counts_at,
    finished,
    job_args,
    progress_of,
    recorded_batches,
    stop_job,
    submit_to_cluster,
    wait_until,
)
from tests.integration.conftest import produce_lines


def _session_members(sid: int) -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getsid(int(entry)) == sid:
                found.append(int(entry))
        except (ProcessLookupError, PermissionError):
            continue
    return found


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def test_a_worker_killed_mid_batch_reruns_its_tasks_on_the_other(
    restore_cluster, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, cluster_session, library_zip,
    store_name, tmp_path,
):  # fmt: skip
    cluster = restore_cluster
    lines, truth = generate(24_000, seed=1701)
    produce_lines(cluster_kafka, cluster_topic, lines)
    log = tmp_path / "job.log"
    args = job_args(cluster_topic, store_name, tmp_path / "cp", cluster_keyspace, "--max-offsets-per-trigger", "4000")
    job = submit_to_cluster(cluster_env, library_zip, log, *args)
    try:
        # Mid-batch: the registry shows a batch begun and not yet recorded.
        def mid_batch() -> bool:
            found = progress_of(cluster_session, cluster_keyspace, store_name)
            return found is not None and found.pending_batch_id is not None and found.pending_batch_id >= 1

        wait_until(mid_batch, 300, "a batch in flight", every_s=0.2)
        worker = cluster.member("spark-worker-1")
        pid = cluster.common.running_pid(worker.name)
        # The machine is lost: the worker, its executor and the executor's Python workers.
        for member in _session_members(pid):
            os.kill(member, signal.SIGKILL)
        assert finished(job, log) == 0, log.read_text()[-3000:]
    finally:
        stop_job(job)
    text = log.read_text(errors="replace")
    assert "Lost executor" in text or "ExecutorLost" in text or "Executor lost" in text.replace("executor", "Executor")
    assert counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(truth)


def _leader_of_partition_0(cluster_kafka, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": cluster_kafka.bootstrap_servers})
    return admin.list_topics(topic=topic, timeout=10).topics[topic].partitions[0].leader


def test_the_topic_id_is_found_again_when_the_broker_its_client_asked_is_killed(
    restore_cluster, cluster_kafka, cluster_topic
):
    """The driver asks Kafka for the topic's id every batch, through an admin client that sends
    the question to the broker its metadata names as controller. Kill exactly that broker: the
    client would wait on it past any patience (the stream then stopped on a broker loss); a new
    client per attempt finds a live one."""
    ids = TopicIds(cluster_kafka, patience_s=120)
    known = ids.of(cluster_topic)
    controller = ids._admin.list_topics(timeout=10).controller_id
    assert known is not None and controller in (1, 2, 3)
    restore_cluster.stop(f"kafka-{controller}", kill=True)
    began = time.monotonic()
    assert ids.of(cluster_topic) == known
    assert time.monotonic() - began < 60


def test_the_leader_broker_killed_mid_stream_loses_no_line(
    restore_cluster, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, cluster_session, library_zip,
    store_name, tmp_path,
):  # fmt: skip
    cluster = restore_cluster
    lines, truth = generate(12_000, seed=1702)
    produce_lines(cluster_kafka, cluster_topic, lines[:6_000])
    log = tmp_path / "job.log"
    args = job_args(cluster_topic, store_name, tmp_path / "cp", cluster_keyspace, "--trigger", "2s")
    job = submit_to_cluster(cluster_env, library_zip, log, *args)
    try:
        wait_until(lambda: recorded_batches(cluster_session, cluster_keyspace, store_name) >= 0, 300, "a first batch")
        leader = _leader_of_partition_0(cluster_kafka, cluster_topic)
        cluster.stop(f"kafka-{leader}", kill=True)
        # Acknowledged by the two brokers left (min.insync.replicas 2), read from a new leader.
        produce_lines(cluster_kafka, cluster_topic, lines[6_000:])
        assert _leader_of_partition_0(cluster_kafka, cluster_topic) not in (leader, -1)

        def state() -> str:
            counts = counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.QUORUM)
            progress = progress_of(cluster_session, cluster_keyspace, store_name)
            alive = "running" if job.poll() is None else f"ended with {job.returncode}"
            return (
                f"{count_difference(counts, dict(truth))}; progress {progress}; the job is {alive}; "
                f"its log ends:\n{log.read_text(errors='replace')[-4000:]}"
            )

        wait_until(
            lambda: counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.QUORUM) == dict(truth),
            300,
            "every line counted",
            every_s=5,
            explain=state,
        )
        assert job.poll() is None, log.read_text()[-3000:]
    finally:
        stop_job(job)


def test_a_frozen_driver_is_fenced_off_when_it_wakes_and_progress_never_goes_back(
    restore_cluster, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, cluster_session, library_zip,
    store_name, tmp_path,
):  # fmt: skip
    lines, truth = generate(12_000, seed=1703)
    produce_lines(cluster_kafka, cluster_topic, lines)
    checkpoint = tmp_path / "cp"
    paused_batch = 1
    # One core each: the frozen application keeps its executor, the successor gets the other.
    args = job_args(cluster_topic, store_name, checkpoint, cluster_keyspace, "--max-offsets-per-trigger", "2000")
    args = (*args, "--lease-ttl", "6")
    zombie_log = tmp_path / "zombie.log"
    # The zombie's first request after minutes frozen may time out on a loaded machine: a
    # long budget lets it retry until Cassandra answers, which is when the fence refuses it.
    zombie = submit_to_cluster(
        cluster_env, library_zip, zombie_log, *args, "--retry-budget", "240", cores=1,
        env={FAULT_ENV: f"pause-before-record:{paused_batch}"},
    )  # fmt: skip
    try:
        # The driver freezes itself after batch 1's writes, before recording it.
        wait_until(lambda: _stopped(zombie.pid), 300, "the first driver to freeze", every_s=0.5)
        frozen = progress_of(cluster_session, cluster_keyspace, store_name)
        assert frozen.pending_batch_id == paused_batch and frozen.last_batch_id == paused_batch - 1

        successor_log = tmp_path / "successor.log"
        successor = submit_to_cluster(cluster_env, library_zip, successor_log, *args, cores=1)
        assert finished(successor, successor_log) == 0, successor_log.read_text()[-3000:]
        done = progress_of(cluster_session, cluster_keyspace, store_name)
        assert done.epoch > frozen.epoch and done.last_batch_id >= paused_batch + 2
        assert counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(truth)

        os.killpg(zombie.pid, signal.SIGCONT)
        assert finished(zombie, zombie_log, 300) != 0
        assert f"fenced off while recording batch {paused_batch}" in zombie_log.read_text(errors="replace")
        after = progress_of(cluster_session, cluster_keyspace, store_name)
        assert (after.last_batch_id, after.offsets, after.epoch) == (done.last_batch_id, done.offsets, done.epoch)
        assert counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(truth)
    finally:
        stop_job(zombie)
