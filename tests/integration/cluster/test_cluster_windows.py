"""A window store's stream on the local cluster: an executor on each of two workers, eight
shuffle partitions, many batches, tasks placed wherever a core is free (no locality wait), so
buckets move between executors from batch to batch. The apply cache's files live on the
executors, one per bucket (Spark's hash partitions of the apply's (word, window) groups), and a
batch trusts a file only if it is the one that finished that bucket at the batch before; a
bucket that moved is read instead (only its windows up to the stream time). Whatever moved,
every window's count is exact."""

from __future__ import annotations

import random
import re
import time
import uuid
from collections import Counter

import pytest
from cassandra import ConsistencyLevel

from statestore.conn import kafka as kafka_io
from statestore.core.event_time import TimedValue
from statestore.store.builder import open_window_store
from tests.integration.cluster.conftest import apply_cache_buckets, finished, job_args, node_session, submit_to_cluster
from tests.integration.conftest import delete_topic
from tests.integration.stream.test_windowed_wordcount import BASE_MS, Reference, _records

MINUTE = 60_000


def _windows_at_all(keyspace: str, store: str) -> Counter:
    connection, session = node_session("127.0.0.1", ConsistencyLevel.ALL)
    try:
        return Counter({(w.key, w.start_ms): w.value for w in open_window_store(session, keyspace, store).all()})
    finally:
        connection.shutdown()


@pytest.fixture
def cluster_topic(cluster_kafka):
    """One partition: every batch reads the next records in time order, so nothing is late
    (four partitions hold the records in blocks of the producer's choosing, and a batch that
    reads all four at once finds the older blocks' records past the grace)."""
    name = f"itc-windows-{uuid.uuid4().hex[:8]}"
    kafka_io.ensure_topic(cluster_kafka, name, 1)
    yield name
    delete_topic(cluster_kafka, name)


def test_hopping_windows_on_two_executors_count_exactly_with_the_apply_cache(
    cluster, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, library_zip, store_name, tmp_path
):
    records = sorted(_records(random.Random(3301), 3_000, BASE_MS, BASE_MS + 60 * MINUTE, "k"))
    kafka_io.produce(cluster_kafka, cluster_topic, [TimedValue(text.encode(), t) for t, text in records])
    began = time.time()
    log = tmp_path / "job.log"
    windows = ("--window", "1m", "--hop", "20s", "--grace", "10m")
    batches = ("--max-offsets-per-trigger", "400", "--driver-apply-records", "0")
    args = job_args(cluster_topic, store_name, tmp_path / "cp", cluster_keyspace, *windows, *batches)
    conf = {
        "spark.sql.shuffle.partitions": "8",
        "spark.executor.cores": "1",  # one executor on each worker
        "spark.locality.wait": "0",  # tasks go to whichever executor is free: buckets move
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    }
    job = submit_to_cluster(cluster_env, library_zip, log, *args, cores=2, conf=conf)
    assert finished(job, log) == 0, log.read_text()[-3000:]
    # In time order nothing is late: no batch wrote a dead letter.
    assert not re.findall(r"[1-9]\d* dead letters", log.read_text()), log.read_text()[-3000:]
    reference = Reference(MINUTE, 20_000, 10 * MINUTE, 86_400_000)
    reference.batch(records)
    assert _windows_at_all(cluster_keyspace, store_name) == reference.counts
    # An executor on each worker kept bucket files, and the files served: a new store's files
    # start complete, so a batch reads only the windows of buckets whose trusted file is on the
    # other executor (the driver's log line of each batch says how many).
    for worker in ("spark-worker-1", "spark-worker-2"):
        shipped = (cluster.CLUSTER / worker / "work").glob("app-*/*/statestore.zip")
        assert any(path.stat().st_mtime >= began for path in shipped), f"no executor on {worker}"
    held = apply_cache_buckets(cluster, store_name, 8, began)
    assert set().union(*held.values()) == set(range(8)), held
    logged = re.findall(r"applied on the executors: (\d+) keys, (\d+) read from Cassandra", log.read_text())
    batches = [(int(keys), int(read)) for keys, read in logged]
    print(f"buckets by worker: {held}; (keys, read) by batch: {batches}")
    assert len(batches) >= 6, log.read_text()[-3000:]
    assert sum(read for _, read in batches) < sum(keys for keys, _ in batches[1:]) / 2, batches
