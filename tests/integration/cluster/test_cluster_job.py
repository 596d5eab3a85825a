"""The job on the local cluster as an operator runs it: submitted to the standalone master,
executors on both workers, the library shipped as a zip to workers whose Python lacks it."""

from __future__ import annotations

import subprocess
import time

from cassandra import ConsistencyLevel

from tests.corpus import generate
from tests.integration.cluster.conftest import counts_at, finished, job_args, submit_to_cluster, wait_until
from tests.integration.conftest import produce_lines


def test_the_workers_python_has_the_dependencies_but_not_the_library(cluster):
    python = str(cluster.executor_python())
    assert subprocess.run([python, "-c", "import pyspark, cassandra, pyarrow"], cwd="/").returncode == 0
    missing = subprocess.run([python, "-c", "import statestore"], cwd="/", capture_output=True, text=True)
    assert "No module named 'statestore'" in missing.stderr


def test_the_job_runs_on_the_workers_and_counts_exactly(
    cluster, cluster_env, cluster_kafka, cluster_topic, cluster_keyspace, library_zip, store_name, tmp_path
):
    lines, truth = generate(3_000, seed=3030)
    produce_lines(cluster_kafka, cluster_topic, lines)
    started = time.time()
    log = tmp_path / "job.log"
    job = submit_to_cluster(
        cluster_env, library_zip, log, *job_args(cluster_topic, store_name, tmp_path / "cp", cluster_keyspace)
    )
    peak = 0
    while job.poll() is None:  # the whole cluster plus the job (driver, executors, Python workers)
        peak = max(peak, cluster.rss_bytes() + cluster._rss_of_tree(job.pid))
        time.sleep(1)
    assert finished(job, log) == 0, log.read_text()[-3000:]
    print(f"peak resident memory of the cluster and the job: {peak / 2**30:.2f} GiB")
    assert 0 < peak < 12 * 2**30
    assert counts_at("127.0.0.2", cluster_keyspace, store_name, ConsistencyLevel.ALL) == dict(truth)
    # Both workers ran executors of this application, each fetching the shipped library.
    for worker in ("spark-worker-1", "spark-worker-2"):
        shipped = list((cluster.CLUSTER / worker / "work").glob("app-*/*/statestore.zip"))
        assert any(path.stat().st_mtime >= started for path in shipped), f"no executor of this job on {worker}"


def test_topics_the_project_creates_are_replicated_as_configured(cluster_kafka, cluster_topic):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource

    assert (cluster_kafka.topic_replication, cluster_kafka.min_insync_replicas) == (3, 2)
    admin = AdminClient({"bootstrap.servers": cluster_kafka.bootstrap_servers})
    partitions = {}

    def listed() -> bool:
        # As for its configs below: a broker that has not yet learnt of the new topic lists it
        # with no partitions (seen once in CI under load).
        partitions.update(admin.list_topics(topic=cluster_topic, timeout=10).topics[cluster_topic].partitions)
        return bool(partitions)

    wait_until(listed, 60, f"the partitions of {cluster_topic}")
    assert len(partitions) == 4 and all(len(p.replicas) == 3 for p in partitions.values())
    resource = ConfigResource(ConfigResource.Type.TOPIC, cluster_topic)
    configs = {}

    def described() -> bool:
        # A broker learns a new topic from the controller's metadata a moment after it exists;
        # on a loaded machine, asked before that, it answers UNKNOWN_TOPIC_OR_PART.
        try:
            configs.update(admin.describe_configs([resource])[resource].result(timeout=10))
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
            return False
        return True

    wait_until(described, 60, f"the configs of {cluster_topic}")
    assert configs["min.insync.replicas"].value == "2"
