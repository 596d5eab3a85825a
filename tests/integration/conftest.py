"""The integration tier: real Cassandra and Kafka from the local stack, Spark in local mode.

Connection settings come from the STATESTORE_* environment like everywhere else, so the
suite can run against a stack on other ports. What of the stack is not running is started
here and stopped again at the end; `make test` starts it beforehand. Every test run works in
its own keyspace and topics and drops them at the end.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from cassandra import OperationTimedOut, ReadTimeout, Unavailable
from cassandra.cluster import NoHostAvailable
from pyspark.errors import StreamingQueryException

from statestore.conn import kafka as kafka_io
from statestore.conn.cassandra import DDL_PROFILE, close_all, create_keyspace, session_for
from statestore.conn.retry import with_retries
from statestore.conn.spark import connector_jars
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig, StreamConfig
from statestore.store.book.lease import current_holder
from statestore.stream.job import JobConfig, start

PROJECT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT / "stack"))
import stack as local_stack  # noqa: E402


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_stack(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`stack/stack.py ARGS` in a process of its own, `env` over this one's environment."""
    return subprocess.run(
        [sys.executable, str(PROJECT / "stack" / "stack.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def stack():
    ports = local_stack.Ports.from_env()
    missing = tuple(name for name in local_stack.COMPONENTS if not local_stack.running_pid(name))
    if missing:
        local_stack.up(auth=False, only=missing)
    yield ports
    if missing:  # stop only what this run started
        local_stack.down(only=missing)


@pytest.fixture(scope="session")
def keyspace(stack):
    name = f"it_{uuid.uuid4().hex[:10]}"
    config = cfg.resolve(CassandraConfig, overrides={"keyspace": name})
    session = session_for(config)
    # Retried: a test that restarts Cassandra may leave the driver reconnecting.
    with_retries(config, "creating the test keyspace", lambda: create_keyspace(session, name))
    yield name
    with_retries(
        config,
        "dropping the test keyspace",
        lambda: session.execute(f"DROP KEYSPACE IF EXISTS {name}", execution_profile=DDL_PROFILE, timeout=60),
    )
    close_all()


@pytest.fixture(scope="session")
def cassandra_config(keyspace) -> CassandraConfig:
    return cfg.resolve(CassandraConfig, overrides={"keyspace": keyspace})


@pytest.fixture(scope="session")
def session(cassandra_config):
    return session_for(cassandra_config)


@pytest.fixture(scope="session")
def kafka_config(stack) -> KafkaConfig:
    return cfg.resolve(KafkaConfig)


def delete_topic(kafka_config: KafkaConfig, name: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka_config.bootstrap_servers})
    # Wait, and keep the client alive meanwhile: one dropped at once may never send the request.
    for future in admin.delete_topics([name]).values():
        future.result(timeout=30)


def _topic_for(kafka_config: KafkaConfig, request, partitions: int):
    name = f"it-{request.node.name[:40].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:6]}"
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in name)
    kafka_io.ensure_topic(kafka_config, name, partitions)
    yield name
    delete_topic(kafka_config, name)


@pytest.fixture
def topic(kafka_config, request):
    yield from _topic_for(kafka_config, request, 4)


@pytest.fixture
def ordered_topic(kafka_config, request):
    """One partition: every batch reads the next records in the order they were sent, so the
    stream time moves as a test's reference assumes, whatever partitions the producer would
    pick (with four, its runs on one partition put a batch's records minutes apart: late)."""
    yield from _topic_for(kafka_config, request, 1)


@pytest.fixture
def store_name(request) -> str:
    return f"s{uuid.uuid4().hex[:12]}"


def produce_lines(kafka_config: KafkaConfig, topic: str, lines) -> int:
    values = (x.encode("utf-8") if isinstance(x, str) else x for x in lines)
    return kafka_io.produce(kafka_config, topic, values)


def run_stream(spark, cassandra_config, kafka_config, topic, store, checkpoint, **stream_overrides):
    """Run the word count with the available-now trigger until it has processed everything;
    returns (the last progress event, the batch applier)."""
    stream = StreamConfig(topic=topic, store=store, checkpoint=str(checkpoint), **stream_overrides)
    running = start(spark, JobConfig(stream, cassandra_config, kafka_config))
    try:
        try:
            finished = running.query.awaitTermination(timeout=600)
        except StreamingQueryException as exc:
            raise RuntimeError(str(exc)) from None
        assert finished, "the available-now query did not finish within 600 s"
        return running.query.lastProgress, running.applier
    finally:
        running.stop()


def run_batches(spark, cassandra_config, kafka_config, topic, store, checkpoint, on_batch=None, **stream_overrides):
    """An available-now run of the word count; every batch's result (BatchResult), in order.
    `on_batch` hears each one as it is applied."""
    from statestore.stream.writer import BatchSeams

    results = []

    def seen(result):
        results.append(result)
        if on_batch is not None:
            on_batch(result)

    stream = StreamConfig(topic=topic, store=store, checkpoint=str(checkpoint), **stream_overrides)
    running = start(spark, JobConfig(stream, cassandra_config, kafka_config), BatchSeams(on_batch=seen))
    try:
        try:
            assert running.query.awaitTermination(timeout=600), "the run did not finish within 600 s"
        except StreamingQueryException as exc:
            raise RuntimeError(str(exc)) from None
    finally:
        running.stop()
    return results


def compaction_class_of(session, keyspace: str, table: str) -> str:
    """The compaction class of a table, as Cassandra's schema holds it."""
    row = session.execute(
        "SELECT compaction FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s", (keyspace, table)
    ).one()
    return row[0]["class"]


def dump(session, keyspace, store) -> dict[str, int]:
    from statestore.core.codecs import decode_long, decode_text
    from statestore.store.book import registry
    from statestore.store.tables import table_for

    table = table_for(registry.lookup(session, keyspace, store))
    return {decode_text(e.key): decode_long(e.value) for e in table.scan_sorted(session)}


def spark_submit_job(*job_args: str, **popen_kwargs):
    """Start jobs/wordcount_stream.py through spark-submit (the venv's, with the connector jars)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", **popen_kwargs.pop("env", {})}
    argv = [
        "spark-submit",
        "--master",
        "local[2]",
        "--jars",
        ",".join(connector_jars()),
        str(PROJECT / "jobs" / "wordcount_stream.py"),
        *job_args,
    ]
    return subprocess.Popen(argv, env=env, **popen_kwargs)


def shop_events_frame(spark, kafka_config, topic: str, per_trigger: int):
    """A user's own streaming DataFrame as the aggregate tests' own-query cases write it: Spark's
    Kafka source over `topic` from the earliest offset, `per_trigger` records a batch, each
    record's JSON (shop, user, amount, ts) parsed into columns beside the Kafka ones."""
    from pyspark.sql import functions as F

    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka_config.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .load()
    )
    schema = "shop string, user string, amount bigint, ts bigint"
    parsed = source.select(
        "topic", "partition", "offset", "value", F.from_json(F.col("value").cast("string"), schema).alias("e")
    )
    return parsed.select("topic", "partition", "offset", "value", "e.*")


def spark_submit_killed_mid_batch(session, keyspace: str, store: str, *job_args: str) -> None:
    """The job spark-submitted with `job_args` and killed half-way through batch 1's writes (the
    crash switch, kill-mid-write:1): asserts it failed leaving batch 0 recorded and batch 1 begun."""
    from statestore.store.book import registry
    from statestore.stream.faults import ENV as FAULT_ENV

    crashed = spark_submit_job(
        *job_args,
        env={FAULT_ENV: "kill-mid-write:1"},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert crashed.wait(timeout=600) != 0
    half = registry.progress(session, keyspace, store)
    assert (half.last_batch_id, half.pending_batch_id) == (0, 1), "the crash left no half-written batch 1"


# What a poll's read through a loaded or recovering node may raise without saying anything of
# the condition polled: the poll asks again rather than failing the test on it.
_TRANSIENT_READ_ERRORS = (NoHostAvailable, OperationTimedOut, ReadTimeout, Unavailable)


def wait_until(condition, timeout_s: float, what: str, every_s: float = 1.0, explain=None):
    """Poll `condition` until it returns something true, and return that. On timeout, fail saying
    what was waited for, for how long, what the condition last returned (when it is more than a
    bare False), the last read that failed, and `explain()`'s account of the state: what a reader
    of a CI log needs to tell a stuck job or a slow machine from a miscount."""
    deadline = time.monotonic() + timeout_s
    last_seen = last_error = ""
    while time.monotonic() < deadline:
        try:
            seen = condition()
        except _TRANSIENT_READ_ERRORS as exc:  # the poll's read failed, not the condition: ask again
            last_error = f"\nthe last poll failed: {exc!r}"
        else:
            if seen:
                return seen
            last_seen = "" if seen is False else f"\nlast seen: {seen!r}"[:2000]
        time.sleep(every_s)
    try:
        detail = f"\n{explain()}" if explain is not None else ""
    except _TRANSIENT_READ_ERRORS as exc:
        detail = f"\n(no account of the state: {exc!r})"
    raise AssertionError(f"{what}: not within {timeout_s:.0f}s{last_seen}{last_error}{detail}")


def default_setting(config_class, name: str):
    """The product's default of one setting (the dataclass field's default)."""
    return {f.name: f.default for f in dataclasses.fields(config_class)}[name]


def wait_for_lease_to_lapse(
    session, keyspace: str, store: str, ttl_s: float | None = None, whose: str = "the writer's"
):
    """Wait until nobody holds the store's lease. A holder that stopped renewing (killed, paused)
    loses it one TTL after its last renewal, at the latest; the deadline is twice the TTL the
    holder ran with (the product's default unless the test set --lease-ttl), so a loaded machine
    has a whole TTL of slack, and a lease that never lapses fails naming its holder."""
    ttl_s = float(ttl_s if ttl_s is not None else default_setting(StreamConfig, "lease_ttl_s"))
    wait_until(
        lambda: current_holder(session, keyspace, store) is None,
        2 * ttl_s,
        f"{whose} lease on store {store} to lapse (lease TTL {ttl_s:.0f}s)",
        explain=lambda: f"still held by {current_holder(session, keyspace, store)}",
    )


def wait_for(condition, timeout_s: float = 120, what: str = "condition met", explain=None):
    """wait_until with the single-node tests' defaults."""
    return wait_until(condition, timeout_s, what, explain=explain)
