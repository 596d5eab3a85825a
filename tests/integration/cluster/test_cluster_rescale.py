"""Rescaling a store's stream on the local cluster (issue 32): a first job with one executor
counts part of the input and stops; a second job with both workers' executors and twice the
shuffle partitions continues the same store. The state stays where it is, in Cassandra: nothing
is restored or moved, and the counts are exact.

Job 2 runs with a new, empty checkpoint and `--recover-from-store`: it needs nothing of job 1
but the store, which records the Kafka offsets its last batch read up to (a job moved to
another cluster has no access to the old checkpoint). Continuing job 1's checkpoint works too
on Spark 4.1, which pins only its internal state-store partitions, unused by our query, to the
checkpoint's (bench/rescale/ does both: the 16 shuffle partitions asked are the 16 used)."""

from __future__ import annotations

import time

from cassandra import ConsistencyLevel

from statestore.core.codecs import decode_text
from statestore.store.book import registry, stream_log
from statestore.store.tables import table_for
from tests.corpus import generate
from tests.integration.cluster.conftest import (
    apply_cache_buckets,
    counts_at,
    finished,
    job_args,
    node_session,
    submit_to_cluster,
)
from tests.integration.conftest import produce_lines

PINNED = "Updating the value of conf"  # Spark: a checkpoint's recorded setting overrides --conf


def _batch_tags(keyspace: str, store: str) -> dict[str, int]:
    """The batch that last wrote each key, read at ALL."""
    connection, session = node_session("127.0.0.1", ConsistencyLevel.ALL)
    try:
        table = table_for(registry.lookup(session, keyspace, store))
        return {decode_text(e.key): e.batch_id for e in table.scan_sorted(session)}
    finally:
        connection.shutdown()


def test_a_second_job_with_twice_the_executors_continues_the_store_exactly(
    cluster, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, cluster_session, library_zip,
    store_name, tmp_path,
):  # fmt: skip
    # Over 1,000 records each, so the executors apply them (--driver-apply-records).
    first, first_truth = generate(2_000, seed=3201)
    second, second_truth = generate(2_000, seed=3202)
    only_first = [f"onlyfirst{chr(97 + i % 26)} stayput{chr(97 + i // 26)}" for i in range(52)]
    first += only_first
    first_truth.update(word for line in only_first for word in line.split())
    produce_lines(cluster_kafka, cluster_topic, first)
    began = time.time()
    log = tmp_path / "job1.log"
    args = job_args(cluster_topic, store_name, tmp_path / "cp1", cluster_keyspace)
    job = submit_to_cluster(cluster_env, library_zip, log, *args, cores=1, conf={"spark.sql.shuffle.partitions": "4"})
    assert finished(job, log) == 0, log.read_text()[-3000:]
    assert counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(first_truth)
    one = apply_cache_buckets(cluster, store_name, 4, began)
    assert sorted(len(b) for b in one.values()) == [0, 4], one  # one executor held all four buckets
    after_first = registry.progress(cluster_session, cluster_keyspace, store_name).last_batch_id

    produce_lines(cluster_kafka, cluster_topic, second)
    began = time.time()
    log = tmp_path / "job2.log"
    args = job_args(cluster_topic, store_name, tmp_path / "cp2", cluster_keyspace, "--recover-from-store")
    # Tasks wait for both executors (Spark's default on a standalone master is not to).
    conf = {"spark.sql.shuffle.partitions": "8", "spark.scheduler.minRegisteredResourcesRatio": "1.0"}
    job = submit_to_cluster(cluster_env, library_zip, log, *args, cores=2, conf=conf)
    assert finished(job, log) == 0, log.read_text()[-3000:]
    text = log.read_text(errors="replace")
    assert PINNED not in text  # a new checkpoint: nothing pins the old number
    assert counts_at("127.0.0.1", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(
        first_truth + second_truth
    )
    # Eight buckets, and an executor on each worker (each fetched the shipped library).
    two = apply_cache_buckets(cluster, store_name, 8, began)
    assert set().union(*two.values()) == set(range(8)), two
    for worker in ("spark-worker-1", "spark-worker-2"):
        shipped = (cluster.CLUSTER / worker / "work").glob("app-*/*/statestore.zip")
        assert any(path.stat().st_mtime >= began for path in shipped), f"no executor of job 2 on {worker}"
    print(f"job 2's buckets by worker: {two}")
    # No state moved: job 2 wrote only the words of its own input; the others keep job 1's tags.
    tags = _batch_tags(cluster_keyspace, store_name)
    untouched = set(first_truth) - set(second_truth)
    assert untouched and all(tags[word] <= after_first for word in untouched)
    assert all(tags[word] > after_first for word in second_truth)
    restart = [
        s.restart_seconds
        for s in stream_log.recent_states(cluster_session, cluster_keyspace, store_name)
        if s.restart_seconds is not None
    ]
    print(f"job 2 (2 executors, 8 shuffle partitions): first batch committed {restart[0]:.2f} s after its start")
