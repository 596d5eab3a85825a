"""Network partitions under a running stream, not process kills (tests/integration/cluster/
partitions.py makes them): a Cassandra node cut off from its peers and every client, and a
driver cut off from everything (a zombie by the network) while a second one takes over.
Counts are checked exactly against the corpus' ground truth every time."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from cassandra import ConsistencyLevel

from statestore.stream.faults import ENV as FAULT_ENV
from tests.corpus import generate
from tests.integration.cluster import partitions
from tests.integration.cluster.conftest import (
    counts_at,
    finished,
    job_args,
    node_session,
    progress_of,
    recorded_batches,
    stop_job,
    submit_to_cluster,
    wait_until,
)
from tests.integration.conftest import produce_lines

pytestmark = pytest.mark.skipif(partitions.unavailable() is not None, reason=str(partitions.unavailable()))

# A cut node refuses no connection: its requests time out (12 s) and are retried on another
# replica; the client's heartbeat (5 s, statestore.conn.cassandra) marks it down within ~10 s.
CUT_S = 25


@pytest.fixture
def netcut(restore_cluster):
    """Our iptables chains (a crashed run's rules removed first); every rule, the driver's
    namespace and the cgroups are gone again after the test, whatever happened."""
    partitions.install()
    try:
        yield partitions
    finally:
        partitions.clear()


def _pending_hints(cluster, node: str) -> list:
    return [p for p in (cluster.CLUSTER / node / "data" / "hints").glob("*.hints") if p.stat().st_size > 0]


def _feed(kafka, topic: str, lines: list[str], every_s: float) -> None:
    """Input that keeps arriving: 500 lines every `every_s`."""
    for start in range(0, len(lines), 500):
        produce_lines(kafka, topic, lines[start : start + 500])
        time.sleep(every_s)


def _progress_via(address: str, keyspace: str, store: str):
    """The store's progress as node `address` coordinates the read (a cut node 2 never sees it)."""
    from statestore.store.book import registry

    connection, session = node_session(address, ConsistencyLevel.QUORUM)
    try:
        return registry.progress(session, keyspace, store)
    finally:
        connection.shutdown()


def _store_led_by(session, keyspace: str, address: str) -> str:
    """A store name whose registry and lease rows (partition key: the name) have the node at
    `address` first among their replicas: the one the driver's token-aware routing sends their
    requests to first (the same one on every retry: replicas are not shuffled)."""
    for _ in range(200):
        name = f"s{uuid.uuid4().hex[:12]}"
        replicas = session.cluster.metadata.get_replicas(keyspace, name.encode())
        if replicas and replicas[0].address == address:
            return name
    raise AssertionError(f"no store name found whose first replica is {address}")


def test_a_cassandra_node_cut_off_mid_stream_leaves_the_counts_exact(
    netcut, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, cluster_session, library_zip, tmp_path,
):  # fmt: skip
    cluster = netcut.local_cluster  # stack/cluster.py
    # The store's bookkeeping (registry row, lease row) led by the node to be cut: the worst
    # case, where every progress read and lease renewal first asks the cut node.
    store_name = _store_led_by(cluster_session, cluster_keyspace, "127.0.0.2")
    lines, truth = generate(9_000, seed=2801)
    produce_lines(cluster_kafka, cluster_topic, lines[:3_000])
    log = tmp_path / "job.log"
    args = job_args(cluster_topic, store_name, tmp_path / "cp", cluster_keyspace, "--trigger", "1s")
    jobs = [submit_to_cluster(cluster_env, library_zip, log, *args)]
    stopped_with = None
    try:
        wait_until(lambda: recorded_batches(cluster_session, cluster_keyspace, store_name) >= 0, 300, "a first batch")
        # Node 2 is cut off (from nodes 1 and 3, the driver and the executors) while input
        # keeps arriving: entries are written at QUORUM by the two nodes left.
        before = _progress_via("127.0.0.1", cluster_keyspace, store_name).last_batch_id
        with netcut.node_cut("cassandra-2"):
            began = time.monotonic()
            _feed(cluster_kafka, cluster_topic, lines[3_000:6_000], 3)
            time.sleep(max(0.0, CUT_S - (time.monotonic() - began)))
            # The cut is real (a connect to node 2 hangs) and writes went on without node 2:
            # nodes 1 and 3 keep hints of what it missed.
            assert partitions.unreachable("127.0.0.2", cluster.CQL_PORT)
            during = _progress_via("127.0.0.1", cluster_keyspace, store_name).last_batch_id
            hinted = _pending_hints(cluster, "cassandra-1") + _pending_hints(cluster, "cassandra-3")
        # Healed: more input, and every line counted.
        produce_lines(cluster_kafka, cluster_topic, lines[6_000:])

        def counted() -> bool:
            return counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.QUORUM) == dict(truth)

        wait_until(lambda: jobs[-1].poll() is not None or counted(), 180, "every line counted", every_s=3)
        if jobs[-1].poll() is not None:
            # Stopped: only with a clear error, never having recorded anything wrong; a restart
            # from the same checkpoint finishes exactly.
            text = log.read_text(errors="replace")
            clear = "LeaseLostError" in text or "CassandraUnavailableError" in text
            assert jobs[-1].returncode != 0 and clear, text[-3000:]
            stopped_with = text.strip().splitlines()[-1]
            log = tmp_path / "restarted.log"
            jobs.append(submit_to_cluster(cluster_env, library_zip, log, *args))
            wait_until(counted, 240, "every line counted after a restart", every_s=3)
        assert jobs[-1].poll() is None, log.read_text()[-3000:]
    finally:
        for job in jobs:
            stop_job(job)
    # Writes went on across the cut: nodes 1 and 3 keep hints of what node 2 missed.
    assert hinted, "no write reached nodes 1 and 3 while node 2 was cut off"
    # Read through node 2 itself too (its own coordinator, QUORUM), and once the writes it
    # missed are handed over from nodes 1 and 3 (hints), every replica at ALL.
    assert counts_at("127.0.0.2", cluster_keyspace, store_name, ConsistencyLevel.QUORUM) == dict(truth)
    wait_until(
        lambda: not _pending_hints(cluster, "cassandra-1") and not _pending_hints(cluster, "cassandra-3"),
        120,
        "hints delivered to cassandra-2",
        every_s=3,
    )
    assert counts_at("127.0.0.2", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(truth)
    # Exact, and available: requests that time out on the cut node are retried on another
    # replica (shuffled), and the cut node is seen down within about 10 s (heartbeats), so the
    # stream went on recording batches, and its lease held, though node 2 leads the store's
    # registry and lease rows.
    assert stopped_with is None, f"the stream stopped during a {CUT_S}s cut of one node of three: {stopped_with}"
    assert during > before, f"the stream recorded no batch during a {CUT_S}s cut of one node of three"


def test_a_driver_cut_off_mid_batch_is_fenced_when_healed_and_progress_never_goes_back(
    netcut, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, cluster_session, library_zip,
    store_name, tmp_path,
):  # fmt: skip
    lines, truth = generate(8_000, seed=2802)
    produce_lines(cluster_kafka, cluster_topic, lines)
    checkpoint = tmp_path / "cp"
    paused_batch = 1
    # One core each: the cut-off application keeps its executor, the successor gets the other.
    args = (
        *job_args(cluster_topic, store_name, checkpoint, cluster_keyspace, "--max-offsets-per-trigger", "2000"),
        *("--lease-ttl", "5"),
    )
    namespace = partitions.DriverNamespace()
    namespace.create()
    zombie_log = tmp_path / "zombie.log"
    # The zombie waits out the partition in its retries (recording batch 1) instead of giving up.
    zombie = namespace.submit(
        cluster_env, library_zip, zombie_log, *args, "--retry-budget", "400",
        env={FAULT_ENV: f"pause-before-record:{paused_batch}"},
    )  # fmt: skip
    try:
        # The fault switch only marks the point: after batch 1's writes, before its record.
        # There the driver's network is cut, then it runs on (a pause of a second, well
        # within its lease): it is a zombie by the network alone.
        wait_until(lambda: partitions.stopped(zombie.pid), 300, "the first driver at the end of batch 1", every_s=0.3)
        frozen = progress_of(cluster_session, cluster_keyspace, store_name)
        assert frozen.pending_batch_id == paused_batch and frozen.last_batch_id == paused_batch - 1
        namespace.cut()
        os.killpg(zombie.pid, signal.SIGCONT)
        cut_at = time.monotonic()

        successor_log = tmp_path / "successor.log"
        successor = submit_to_cluster(cluster_env, library_zip, successor_log, *args, cores=1)
        assert finished(successor, successor_log, 240) == 0, successor_log.read_text()[-3000:]
        done = progress_of(cluster_session, cluster_keyspace, store_name)
        assert done.epoch > frozen.epoch and done.last_batch_id >= paused_batch + 2
        assert counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(truth)
        text = zombie_log.read_text(errors="replace")
        assert zombie.poll() is None, f"the cut-off driver did not live to be healed: {text[-3000:]}"
        # It kept trying to reach Cassandra all along: cut off, not frozen.
        assert "retrying" in text, text[-3000:]

        namespace.heal()
        cut_s = time.monotonic() - cut_at
        assert finished(zombie, zombie_log, 120) != 0
        text = zombie_log.read_text(errors="replace")
        assert "StoreFencedError" in text or "LeaseLostError" in text, text[-3000:]
        assert f"fenced off while recording batch {paused_batch}" in text, text[-3000:]
        after = progress_of(cluster_session, cluster_keyspace, store_name)
        assert (after.last_batch_id, after.offsets, after.epoch) == (done.last_batch_id, done.offsets, done.epoch)
        assert counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(truth)
        print(f"driver cut off for {cut_s:.0f}s")
    finally:
        stop_job(zombie)
