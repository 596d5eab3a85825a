"""The cluster tier: the local cluster (stack/cluster.py) of 3 Cassandra nodes, 3 Kafka brokers
and a Spark standalone master with 2 workers, on 127.0.0.1-3 beside the single-node stack.

The cluster is started once for this package if it is not up (and stopped again once its
tests are done, so the rest of the suite has the machine to itself); every
test that takes a process down starts it again before it ends. Jobs are submitted to the
standalone master with the library shipped as a zip: the workers' Python does not have it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
import warnings
from pathlib import Path

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

from statestore.conn import kafka as kafka_io
from statestore.conn.cassandra import DDL_PROFILE, create_keyspace, session_for
from statestore.conn.spark import connector_jars, library_archive
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.model import Replication
from tests.conftest import TEST_SPARK_JVM_OPTIONS
from tests.integration.conftest import PROJECT, delete_topic, wait_until  # noqa: F401  (the cluster tests' poll)

sys.path.insert(0, str(PROJECT / "stack"))
import cluster as local_cluster


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/integration/cluster" in str(item.fspath):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="package")
def cluster():
    """The local cluster; what of it was not running is started, and stopped again at the end."""
    known = local_cluster.recorded_nodes() is not None
    missing = [row["name"] for row in local_cluster.status_rows() if row["pid"] is None] if known else None
    if missing is None or missing:
        local_cluster.up()
    yield local_cluster
    if missing is None:
        local_cluster.down()
    else:
        for name in missing:
            local_cluster.stop(name)


@pytest.fixture(scope="package")
def cluster_env(cluster) -> dict[str, str]:
    return cluster.connection_env()


@pytest.fixture(scope="package")
def cluster_keyspace(cluster_env):
    name = f"itc_{uuid.uuid4().hex[:10]}"
    config = cfg.resolve(CassandraConfig, env=cluster_env, overrides={"keyspace": name})
    session = session_for(config)
    create_keyspace(session, name, Replication.network(["dc1:3"]))
    yield name
    session.execute(f"DROP KEYSPACE IF EXISTS {name}", execution_profile=DDL_PROFILE, timeout=120)


@pytest.fixture(scope="package")
def cluster_cassandra(cluster_env, cluster_keyspace) -> CassandraConfig:
    return cfg.resolve(CassandraConfig, env=cluster_env, overrides={"keyspace": cluster_keyspace})


@pytest.fixture(scope="package")
def cluster_session(cluster_cassandra):
    return session_for(cluster_cassandra)


@pytest.fixture(scope="package")
def cluster_kafka(cluster_env) -> KafkaConfig:
    return cfg.resolve(KafkaConfig, env=cluster_env)


@pytest.fixture
def cluster_topic(cluster_kafka, request):
    name = f"itc-{request.node.name[:40]}-{uuid.uuid4().hex[:6]}"
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in name)
    kafka_io.ensure_topic(cluster_kafka, name, 4)
    yield name
    # Clean-up only: a topic each test names afresh. A test that killed a broker may leave the
    # controller slow to answer for a while; the deletion is then left to the cluster's teardown.
    try:
        delete_topic(cluster_kafka, name)
    except TimeoutError:
        warnings.warn(f"topic {name} not deleted within 30 s (a broker was killed?)", stacklevel=1)


@pytest.fixture(scope="session")
def library_zip(tmp_path_factory) -> Path:
    return library_archive(tmp_path_factory.mktemp("dist") / "statestore.zip")


@pytest.fixture
def restore_cluster(cluster):
    """Whatever a test takes down comes back before the next test."""
    yield cluster
    for row in cluster.status_rows():
        if row["state"] == "stopped":
            cluster.start(row["name"])
        else:
            _resume(row["pid"])


def _resume(pid: int | None) -> None:
    if pid is not None:
        try:
            os.killpg(os.getpgid(pid), signal.SIGCONT)
        except ProcessLookupError:
            pass


def submit_to_cluster(
    cluster_env,
    library_zip: Path,
    log: Path,
    *job_args: str,
    cores: int = 2,
    env=None,
    driver_ip: str = "127.0.0.1",
    launcher: tuple[str, ...] = (),
    conf: dict[str, str] | None = None,
):
    """spark-submit jobs/wordcount_stream.py to the standalone master, as an operator would:
    the library shipped with --py-files, executors on the workers with the workers' Python.
    `driver_ip`: where the driver listens (and what it advertises to the executors);
    `launcher`: what runs spark-submit (partitions.py: `ip netns exec`, which execs it, so the
    process and its session are still the driver's); `conf`: Spark settings (`--conf`)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_PYTHON", "STATESTORE_"))}
    environment.update(
        cluster_env,
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP=driver_ip,
        **(env or {}),
    )
    argv = [
        *launcher,
        "spark-submit",
        *("--master", local_cluster.SPARK_MASTER_URL, "--total-executor-cores", str(cores)),
        *("--executor-memory", "768m", "--driver-memory", "768m"),
        # The executors' JVMs, like the driver's (SPARK_SUBMIT_OPTS, tests/conftest.py).
        *("--conf", f"spark.executor.extraJavaOptions={TEST_SPARK_JVM_OPTIONS}"),
        *(arg for key, value in (conf or {}).items() for arg in ("--conf", f"{key}={value}")),
        *("--py-files", str(library_zip), "--jars", ",".join(connector_jars())),
        "--driver-java-options",
        f"-Dlog4j.configurationFile=file:{PROJECT / 'stack' / 'spark-log4j2.properties'}",
        str(PROJECT / "jobs" / "wordcount_stream.py"),
        *job_args,
    ]
    out = open(log, "w")
    return subprocess.Popen(
        argv, env=environment, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=log.parent
    )


def apply_cache_buckets(cluster, store: str, buckets: int, since: float) -> dict[str, set[int]]:
    """Per worker: the apply-cache buckets that a job's executors kept for `store` with
    `buckets` shuffle partitions since `since` (statestore.stream.apply_cache's files)."""
    found: dict[str, set[int]] = {}
    for worker in ("spark-worker-1", "spark-worker-2"):
        paths = (cluster.CLUSTER / worker / "work").glob(f"app-*/*/statestore-apply-cache/*.{store}-{buckets}-*")
        found[worker] = {int(Path(p).name.rsplit("-", 1)[1]) for p in paths if p.stat().st_mtime >= since}
    return found


def stop_job(proc: subprocess.Popen) -> None:
    """End a submitted job and everything it started (its session), if it still runs."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGCONT)
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)


def node_session(address: str, consistency=ConsistencyLevel.ONE):
    """A session whose every request goes to (and is coordinated by) the node at `address`."""
    profile = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([address]), consistency_level=consistency, request_timeout=30
    )
    # The product's own timeouts for connecting (statestore.conn.cassandra): on a loaded machine
    # a node answers its control connection's queries in more than the driver's 2 s default.
    connection = Cluster(
        [address],
        port=local_cluster.CQL_PORT,
        protocol_version=5,
        connect_timeout=30,
        control_connection_timeout=30,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
    )
    return connection, connection.connect()


def counts_at(address: str, keyspace: str, store: str, consistency) -> dict[str, int]:
    """Every count of `store` as read through the node at `address` at `consistency`."""
    from statestore.core.codecs import decode_long, decode_text
    from statestore.store.book import registry
    from statestore.store.tables import table_for

    connection, session = node_session(address, consistency)
    try:
        table = table_for(registry.lookup(session, keyspace, store))
        return {decode_text(e.key): decode_long(e.value) for e in table.scan_sorted(session)}
    finally:
        connection.shutdown()


def count_difference(counts: dict[str, int], truth: dict[str, int]) -> str:
    """How `counts` differ from `truth`, in a few lines: missing, extra and wrong keys."""
    missing = sorted(set(truth) - set(counts))
    extra = sorted(set(counts) - set(truth))
    wrong = sorted(k for k in set(truth) & set(counts) if truth[k] != counts[k])
    total = sum(counts.values()) - sum(truth.values())
    sample = ", ".join(f"{k}: {counts[k]} for {truth[k]}" for k in wrong[:5])
    return (
        f"{len(missing)} keys missing, {len(extra)} extra, {len(wrong)} wrong ({sample}); "
        f"total {total:+d} against the truth's {sum(truth.values())}"
    )


def job_args(topic: str, store: str, checkpoint: Path, keyspace: str, *extra: str) -> tuple[str, ...]:
    return ("--topic", topic, "--store", store, "--checkpoint", str(checkpoint), "--keyspace", keyspace, *extra)


def progress_of(session, keyspace: str, store: str):
    """The store's registry progress, or None before the job registered it."""
    from cassandra import InvalidRequest

    from statestore.conn.retry import is_transient
    from statestore.core.errors import StoreNotFoundError
    from statestore.store.book import registry

    try:
        return registry.progress(session, keyspace, store)
    # No store yet, or not even the registry table.
    except (StoreNotFoundError, InvalidRequest):
        return None
    except Exception as exc:  # a serial read caught by a node going down, or by the job's own LWTs
        if is_transient(exc):
            return None
        raise


def recorded_batches(session, keyspace: str, store: str) -> int:
    """How many batches the store has recorded (-1 before the first)."""
    found = progress_of(session, keyspace, store)
    return -1 if found is None or found.last_batch_id is None else found.last_batch_id


def finished(proc: subprocess.Popen, log: Path, timeout_s: float = 600) -> int:
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_job(proc)
        raise AssertionError(f"the job did not end within {timeout_s}s: {log.read_text()[-3000:]}") from None
