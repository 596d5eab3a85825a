"""Cassandra nodes lost under a running stream (replication factor 3, QUORUM): one node
killed, two nodes down, a rolling restart of all three, and reads with a node down. Counts are
checked exactly against the corpus' ground truth every time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

from cassandra import ConsistencyLevel

from tests.corpus import generate
from tests.integration.cluster.conftest import (
    count_difference,
    counts_at,
    finished,
    job_args,
    recorded_batches,
    stop_job,
    submit_to_cluster,
    wait_until,
)
from tests.integration.conftest import produce_lines

# Cassandra's default hints_flush_period (stack/cassandra.yaml leaves it): how often a node's
# buffered hints reach its hint files.
HINTS_FLUSH_PERIOD_S = 10


def _pending_hints(cluster, node: str) -> list:
    return [p for p in (cluster.CLUSTER / node / "data" / "hints").glob("*.hints") if p.stat().st_size > 0]


def test_a_node_killed_mid_stream_loses_nothing_and_hints_bring_it_up_to_date(
    restore_cluster, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, cluster_session, library_zip,
    store_name, tmp_path,
):  # fmt: skip
    cluster = restore_cluster
    # Half the input before the kill, half after: batches run with the node down however quick
    # the machine is (all of it up front, a quiet machine counted it before the kill landed).
    # Each phase waits for its counts, not for a number of batches: Spark's rate limit splits
    # --max-offsets-per-trigger over the partitions, so a batch may read fewer lines.
    first, first_truth = generate(8_000, seed=1601)
    rest, rest_truth = generate(8_000, seed=1611)
    truth = first_truth + rest_truth
    produce_lines(cluster_kafka, cluster_topic, first)
    log = tmp_path / "job.log"
    args = job_args(
        cluster_topic, store_name, tmp_path / "cp", cluster_keyspace, "--max-offsets-per-trigger", "800",
        "--trigger", "1s",
    )  # fmt: skip
    job = submit_to_cluster(cluster_env, library_zip, log, *args)

    def counted(expected) -> bool:
        return recorded_batches(cluster_session, cluster_keyspace, store_name) >= 0 and counts_now() == dict(expected)

    def counts_now() -> dict[str, int]:
        return counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.QUORUM)

    def state(expected):
        return lambda: (
            f"{count_difference(counts_now(), dict(expected))}; batches recorded: "
            f"{recorded_batches(cluster_session, cluster_keyspace, store_name)}; the job "
            f"{'runs' if job.poll() is None else 'ended'}: {log.read_text(errors='replace')[-2000:]}"
        )

    try:
        wait_until(lambda: counted(first_truth), 300, "the first half counted", every_s=2, explain=state(first_truth))
        cluster.stop("cassandra-3", kill=True)
        killed_at = recorded_batches(cluster_session, cluster_keyspace, store_name)
        produce_lines(cluster_kafka, cluster_topic, rest)
        wait_until(
            lambda: counted(truth),
            300,
            "the second half counted with cassandra-3 down",
            every_s=2,
            explain=state(truth),
        )
        assert recorded_batches(cluster_session, cluster_keyspace, store_name) > killed_at
        assert job.poll() is None, log.read_text()[-3000:]  # a node down stopped nothing
    finally:
        stop_job(job)
    # The writes node 3 missed wait as hints on the others (buffered, then flushed to their hint
    # files every hints_flush_period: a quick run can end before the first flush)...
    wait_until(
        lambda: _pending_hints(cluster, "cassandra-1") or _pending_hints(cluster, "cassandra-2"),
        3 * HINTS_FLUSH_PERIOD_S,
        "hints for cassandra-3 in the hint files of cassandra-1 or cassandra-2",
        explain=lambda: (
            "hint files: "
            + ", ".join(
                str(p.name)
                for n in ("cassandra-1", "cassandra-2")
                for p in (cluster.CLUSTER / n / "data" / "hints").glob("*")
            )
        ),
    )
    assert counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.QUORUM) == dict(truth)
    cluster.start("cassandra-3")
    # ... and are replayed once it is back: nothing pending, and its own copy is whole.
    wait_until(
        lambda: not _pending_hints(cluster, "cassandra-1") and not _pending_hints(cluster, "cassandra-2"),
        240,
        "hints delivered to cassandra-3",
        every_s=3,
    )
    assert counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(truth)


def test_two_nodes_down_stop_the_stream_with_a_clear_error_and_a_restart_is_exact(
    restore_cluster, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, cluster_session, library_zip,
    store_name, tmp_path,
):  # fmt: skip
    """Over 120 s (about 135 s on a quiet CI machine) because it waits out the product's own
    bound: Spark's four attempts of the failing task, each within the 15 s retry budget, before
    the stream stops; then two Cassandra nodes restart and a second job counts everything."""
    cluster = restore_cluster
    lines, truth = generate(8_000, seed=1602)
    # Part of the input before the nodes go down, the rest after: the stream meets them down
    # however quick the machine is (with all of it up front it could finish first).
    produce_lines(cluster_kafka, cluster_topic, lines[:1_000])
    checkpoint = tmp_path / "cp"
    args = job_args(cluster_topic, store_name, checkpoint, cluster_keyspace, "--max-offsets-per-trigger", "500")
    budget = ("--retry-budget", "15", "--request-timeout", "5")
    log = tmp_path / "first.log"
    job = submit_to_cluster(cluster_env, library_zip, log, *args, *budget, "--trigger", "1s")
    try:
        wait_until(lambda: recorded_batches(cluster_session, cluster_keyspace, store_name) >= 1, 300, "two batches")
        cluster.stop("cassandra-2", kill=True)
        cluster.stop("cassandra-3", kill=True)
        down_at = time.monotonic()
        produce_lines(cluster_kafka, cluster_topic, lines[1_000:])
        assert finished(job, log, 400) != 0
    finally:
        stop_job(job)
    took = time.monotonic() - down_at
    text = log.read_text(errors="replace")
    # Spark retries a failed task (4 attempts), each within the budget: a bounded stop.
    assert took < 4 * 15 + 120, f"the stream took {took:.0f}s to stop"
    # The error names the levels, and the replicas missing: as the driver sees them, or as
    # Cassandra said (needed / alive).
    assert "CassandraUnavailableError" in text and "entries need QUORUM" in text, text[-3000:]
    assert "sees down: 127.0.0.2:9142, 127.0.0.3:9142" in text or "needs 2 replicas" in text, text[-3000:]
    cluster.start("cassandra-2")
    cluster.start("cassandra-3")
    log = tmp_path / "second.log"
    job = submit_to_cluster(cluster_env, library_zip, log, *args)
    assert finished(job, log) == 0, log.read_text()[-3000:]
    assert counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(truth)


def test_a_rolling_restart_of_every_node_does_not_stop_the_stream(
    restore_cluster, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, cluster_session, library_zip,
    store_name, tmp_path,
):  # fmt: skip
    cluster = restore_cluster
    lines, truth = generate(9_000, seed=1603)
    produce_lines(cluster_kafka, cluster_topic, lines[:3_000])
    log = tmp_path / "job.log"
    args = job_args(cluster_topic, store_name, tmp_path / "cp", cluster_keyspace, "--trigger", "2s")
    job = submit_to_cluster(cluster_env, library_zip, log, *args)
    try:
        wait_until(lambda: recorded_batches(cluster_session, cluster_keyspace, store_name) >= 0, 300, "a first batch")
        # Input keeps arriving while each node in turn is drained, stopped and started again.
        feeder = threading.Thread(target=_feed, args=(cluster_kafka, cluster_topic, lines[3_000:]))
        feeder.start()
        for node in ("cassandra-1", "cassandra-2", "cassandra-3"):
            cluster.stop(node)
            time.sleep(3)
            cluster.start(node)
            assert job.poll() is None, log.read_text()[-3000:]
        feeder.join()
        wait_until(
            lambda: counts_at("127.0.0.2", cluster_keyspace, store_name, ConsistencyLevel.QUORUM) == dict(truth),
            300,
            "every line counted",
            every_s=5,
        )
        assert job.poll() is None, log.read_text()[-3000:]
    finally:
        stop_job(job)
    assert counts_at("127.0.0.3", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(truth)


def _feed(kafka, topic: str, lines: list[str]) -> None:
    """Input that keeps arriving: 500 lines every 2 s."""
    for start in range(0, len(lines), 500):
        produce_lines(kafka, topic, lines[start : start + 500])
        time.sleep(2)


def _cli(cluster_env, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATESTORE_")} | cluster_env
    return subprocess.run(
        [sys.executable, "-m", "statestore", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_cli_and_http_answer_gets_with_a_node_down(
    restore_cluster, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, library_zip, store_name, tmp_path
):
    cluster = restore_cluster
    lines, truth = generate(1_000, seed=1604)
    produce_lines(cluster_kafka, cluster_topic, lines)
    log = tmp_path / "job.log"
    job = submit_to_cluster(
        cluster_env, library_zip, log, *job_args(cluster_topic, store_name, tmp_path / "cp", cluster_keyspace)
    )
    assert finished(job, log) == 0, log.read_text()[-3000:]
    word, count = truth.most_common(1)[0]
    cluster.stop("cassandra-1", kill=True)  # the first contact point, too
    got = _cli(cluster_env, "get", store_name, word, "--keyspace", cluster_keyspace)
    assert got.returncode == 0 and got.stdout.strip() == str(count), got.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATESTORE_")} | cluster_env
    server = subprocess.Popen(
        [sys.executable, "-m", "statestore", "serve", "--port", "18990", "--keyspace", cluster_keyspace,
         "--no-access-log"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:18990/stores/{store_name}/keys/{word}"

        def answered() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    return response.status == 200
            except OSError:
                return False

        wait_until(answered, 60, "the HTTP API answering")
        for _ in range(20):  # every node the driver may pick: none of them may fail a get
            with urllib.request.urlopen(url, timeout=10) as response:
                assert json.load(response)["value"] == count
    finally:
        server.terminate()
        server.wait(timeout=30)
