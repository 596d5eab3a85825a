"""The streaming word count: Kafka text lines -> counts in a Cassandra store.

Spark reads the topic and keeps only offsets in its checkpoint (no Spark state store).
Each micro-batch is tokenized and aggregated with Spark SQL built-ins into
(word, delta, latest event time); executors then apply the deltas to the store with the
replay-safe apply (statestore.stream.apply), and the driver records the batch in the registry
(statestore.stream.batches). Input that cannot be counted goes to the store's dead-letter table.

The rule it keeps: a query writes the store only while it holds the store's lease and the
newest epoch, and only from a checkpoint that belongs to the store's history (or, with
--recover-from-store, after finishing the store's pending batch).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from statestore.conn.cassandra import check_writer_scope, require_keyspace, session_for, tls_files
from statestore.conn.kafka import TopicIds, partition_count, spark_source_options
from statestore.conn.retry import with_retries
from statestore.conn.spark import build_session
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig, StreamConfig
from statestore.core.config.stream import AGGREGATE_STORE_KINDS, AGGREGATE_STORE_TYPES
from statestore.core.errors import (
    CassandraUnavailableError,
    CheckpointMismatchError,
    ConfigError,
    KafkaError,
    StateStoreError,
    StoreFencedError,
    StoreMismatchError,
)
from statestore.core.model import StoreSpec, StoreType
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.store.book import registry, schema, stream_log
from statestore.store.book.lease import LeaseHeldError, LeaseLostError, StoreLease
from statestore.store.book.registry import KafkaOffsets
from statestore.store.provision import DEFAULT_STORE_TYPE, provision_store
from statestore.store.tables import options_with_compaction
from statestore.stream import checkpoint, json_input
from statestore.stream.batches import BatchApplier, finish_pending_batch
from statestore.stream.checkpoint import QueryCheckpoint
from statestore.stream.json_input import JsonInput
from statestore.stream.monitor import StreamMonitor
from statestore.stream.position import SourceTopic, naming_partitions
from statestore.stream.writer import SHIPPED, BatchSeams, InputStage, StoreWriter

_log = logging.getLogger("statestore.stream.job")


@dataclass(frozen=True)
class JobConfig:
    stream: StreamConfig
    cassandra: CassandraConfig
    kafka: KafkaConfig
    # How a user's own query reads its records (statestore.stream.own_query), recorded in place of
    # the stream's settings; None: the stream's (input_settings_of).
    own_input: registry.InputSettings | None = None


def resolve_store(session, job: JobConfig) -> StoreSpec:
    """The store to write: as registered, or a new one with the requested layout. A registered
    store of another schema version (schema), or levels that do not overlap across the
    keyspace's data centers (check_writer_scope), are refused before anything is written."""
    require_keyspace(session, job.cassandra.keyspace)
    check_writer_scope(session, job.cassandra.keyspace)
    existing = registry.find(session, job.cassandra.keyspace, job.stream.store)
    if existing is not None:
        schema.require_current(session, job.cassandra.keyspace, job.stream.store)
    registry.ensure_table(session, job.cassandra.keyspace)
    windowing = job.stream.windowing
    value_format = _value_format(job.stream)
    wanted = job.own_input or input_settings_of(job.stream)
    recorded = None
    if existing is not None:
        _refuse_other_values(existing, value_format)
        _refuse_other_windows(existing, windowing)
        recorded = registry.input_settings(session, job.cassandra.keyspace, job.stream.store)
        _refuse_other_input(existing.name, recorded, wanted)
    store_type = StoreType(job.stream.store_type) if job.stream.store_type else None
    if store_type is None and job.stream.window is not None:
        store_type = StoreType.PARTITIONED_WINDOW
    if store_type is None and job.stream.session_gap is not None:
        store_type = StoreType.PARTITIONED_SESSION
    if existing is not None:
        store_type = store_type or existing.store_type
        same_type = store_type is existing.store_type
        spec = StoreSpec(
            existing.keyspace,
            existing.name,
            store_type,
            job.stream.partitions or existing.partitions,
            # The registered table and sub-partitions (a re-laid-out store's table is not the default name).
            existing.table if same_type else None,
            windowing=_reopened_windowing(windowing, existing) if store_type.timed else None,
            subpartitions=existing.subpartitions if same_type else 1,
            value_codec=value_format,
        )
    else:
        partitions = job.stream.partitions or partition_count(job.kafka, job.stream.topic)
        if partitions is None:
            raise KafkaError(
                f"topic '{job.stream.topic}' does not exist at {job.kafka.bootstrap_servers}: create it "
                f"(`statestore produce {job.stream.topic} FILE` does) or pass --partitions"
            )
        spec = StoreSpec(
            job.cassandra.keyspace,
            job.stream.store,
            store_type or DEFAULT_STORE_TYPE,
            partitions,
            windowing=windowing,
            value_codec=value_format,
        )
    if job.stream.aggregate is not None and spec.store_type not in AGGREGATE_STORE_TYPES:
        raise ConfigError(f"{AGGREGATE_STORE_KINDS}, not a {spec.store_type} store")
    # An existing table keeps its options (CREATE TABLE IF NOT EXISTS changes nothing); a
    # registered store whose table is missing is created as a new one would be.
    registered = provision_store(
        session,
        spec,
        job.stream.topic,
        options=options_with_compaction(spec, job.stream.compaction),
        dead_letter_retention_s=job.stream.dead_letter_retention_ms // 1000,
    )
    if wanted is not None and recorded is None:
        # A new store (or one made before input settings were recorded) takes the job's; of two
        # jobs creating it at once with other settings, the second is refused here.
        _refuse_other_input(registered.name, registry.record_input_settings(session, registered, wanted), wanted)
    return registered


def _value_format(stream: StreamConfig) -> str:
    """The registry's value format of the job's store: the measures' (AggregateSpec.value_format)
    for JSON records, the word count's long for text lines."""
    aggregate = stream.aggregate_spec
    return "long" if aggregate is None else aggregate.value_format


def _refuse_other_values(existing: StoreSpec, value_format: str) -> None:
    """StoreMismatchError, before anything is written, when the registered store keeps other
    values than the job would write (other measures, or counts and measures)."""
    if existing.value_codec == value_format:
        return
    what = {"long": "word counts (text lines)"}
    held = what.get(existing.value_codec, existing.value_codec)
    wanted = what.get(value_format, value_format)
    raise StoreMismatchError(
        f"store '{existing.name}' keeps {held}; this job would write {wanted}. Nothing was written. Run it with "
        "the store's own settings (--input-format, --aggregate), or write to another store."
    )


def _refuse_other_windows(existing: StoreSpec, windowing: WindowSpec | SessionSpec | None) -> None:
    """StoreMismatchError, before anything is written, when the registered store counts in other
    windows or sessions (size, hop, gap, grace or retention) than the job asks for; None asks
    for none (the store's own are used)."""
    held = existing.windowing
    if windowing is None or held is None or type(held) is not type(windowing):
        return
    if _settings(held) == _settings(windowing):
        return
    raise StoreMismatchError(
        f"store '{existing.name}' counts in {held.summary()}; this job asks for {windowing.summary()}. Nothing was "
        "written. Run it with the store's own settings (--window, --hop, --session-gap, --grace, --retention), or "
        "write to another store."
    )


def _settings(windowing: WindowSpec | SessionSpec) -> dict[str, int]:
    """What a windowing asks for: everything but how it is stored (the segment, and whether
    hopping windows are panes), which the registry fixes."""
    return {name: value for name, value in windowing.as_dict().items() if name not in ("segment_ms", "panes")}


def _reopened_windowing(
    windowing: WindowSpec | SessionSpec | None, existing: StoreSpec
) -> WindowSpec | SessionSpec | None:
    """The windowing a job reopening `existing` writes with: the store's own when it has one
    (_refuse_other_windows has checked that the job asks for the same; its segment and pane
    choice are the store's), else the job's."""
    held = existing.windowing
    return held if windowing is None or type(held) is type(windowing) else windowing


def input_settings_of(stream: StreamConfig) -> registry.InputSettings | None:
    """What the registry records of the job's input (registry.InputSettings): how JSON records
    are keyed and timed; None for text lines, the word count."""
    if stream.input_format != "json":
        return None
    return registry.InputSettings("json", stream.key_fields, stream.key_expr, stream.time_field)


def _refuse_other_input(
    name: str, recorded: registry.InputSettings | None, wanted: registry.InputSettings | None
) -> None:
    """StoreMismatchError, before anything is written, when the store records other input
    settings than the job's: its keys (or their times) would silently mean something else.
    None recorded: a word count's store, or one that takes the job's settings now."""
    if recorded is None or recorded == wanted:
        return
    given = "text lines" if wanted is None else wanted.describe()
    raise StoreMismatchError(
        f"store '{name}' reads its records with {recorded.describe()}; this job would read them with {given}. "
        "Nothing was written. Run it with the store's own settings, or write to another store."
    )


def json_input_of(stream: StreamConfig) -> JsonInput | None:
    """The JSON input stage's settings (None: text lines, the word count)."""
    if stream.input_format != "json":
        return None
    return JsonInput(stream.aggregate_spec, stream.key_fields, stream.key_expr, stream.time_field)


def check_json_input(spark, spec: JsonInput) -> None:
    """ConfigError when the input stage cannot be planned (a --key-expr Spark cannot read): found
    on an empty batch of the Kafka source's shape, before the store is touched."""
    from pyspark.errors import AnalysisException, ParseException

    empty = spark.createDataFrame(
        [],
        "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, timestampType int",
    )
    try:
        json_input.parsed_records(empty, spec).schema  # noqa: B018 - analysing the plan is the check
    except (AnalysisException, ParseException) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"--key-expr {spec.key_expr!r}: Spark cannot use it: {first}") from None


def _kafka_source(spark, job: JobConfig, starting_offsets: str):
    reader = (
        spark.readStream.format("kafka")
        .options(**spark_source_options(job.kafka))
        .option("subscribe", job.stream.topic)
        .option("startingOffsets", starting_offsets)
    )
    if job.stream.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(job.stream.max_offsets_per_trigger))
    return reader.load()


@dataclass
class RunningStream:
    """A started word-count query with the lease it holds; `stop()` ends both. `failure`: why
    the query ended, when it failed (recorded as the stream's state)."""

    query: object
    applier: BatchApplier
    lease: StoreLease
    monitor: StreamMonitor

    stopped: bool = False

    def stop(self, failure: str | None = None) -> None:
        if self.stopped:  # once: a second stop would record the run's end again
            return
        self.stopped = True
        self.monitor.state(stream_log.STOPPING, failure)
        try:
            if self.query.isActive:
                self.query.stop()
        finally:
            self.lease.release()
            self.monitor.state(stream_log.FAILED if failure else stream_log.STOPPED, failure)


def _fence_taken_over_batch(session, job, spec: StoreSpec, epoch: int) -> None:
    """A batch an earlier writer began and never recorded is this run's to finish (a replay), but
    that writer may still be paused mid-batch: recorded as the store's fenced batch, so a drop is
    refused until the operator says it is stopped (registry.record_fenced_batch; its late dead
    letters would land in a store created again under the name)."""
    pending = with_retries(
        job.cassandra, "reading the store's progress", lambda: registry.progress(session, spec.keyspace, spec.name)
    ).unfinished_batch
    if pending is not None:
        with_retries(
            job.cassandra,
            "recording the batch taken over",
            lambda: registry.record_fenced_batch(session, spec, pending, epoch),
        )


def _check_checkpoint(
    session, job: JobConfig, applier: BatchApplier, monitor: StreamMonitor, source: SourceTopic
) -> str:
    """Refuse a topic created again since the store last read it, and a checkpoint that does
    not belong to the store's history (before any read); record the topic's id;
    with --recover-from-store, finish the store's pending batch first. Returns where a new
    checkpoint starts reading: the store's position when recovering, else --starting-offsets."""
    writer, spark, location = applier.writer, applier.checkpoint.spark, applier.checkpoint.location
    spec = writer.spec
    progress = registry.progress(session, spec.keyspace, spec.name)
    topic_id = source.checked_id(progress, spec.name, location)
    if topic_id is not None and topic_id != progress.topic_id:
        registry.record_topic_id(session, spec, topic_id, writer.epoch)
    owner = checkpoint.owner(spark, location)
    committed = owner is not None and checkpoint.committed_batches(spark, location)
    problem = checkpoint.checkpoint_problem(progress, owner, job.stream.recover_from_store, committed)
    if problem:
        way_out = None if progress.has_batches else checkpoint.START_OVER
        raise checkpoint.mismatch_error(spec.name, location, problem, way_out)
    if owner is None and progress.has_batches:  # only reached with --recover-from-store
        monitor.state(stream_log.RECOVERING, "--recover-from-store: finishing the store's pending batch, if any")
        finish_pending_batch(spark, writer, job.kafka)
        return _recovery_start(registry.progress(session, spec.keyspace, spec.name), job)
    return job.stream.starting_offsets


def _recovery_start(progress, job: JobConfig) -> str:
    """Where a new checkpoint recovered from the store starts: the store's position, naming
    every partition the topic has now (position.naming_partitions: one added since the store's
    last batch is read from its start); --starting-offsets when the store recorded none."""
    stored = KafkaOffsets.parse_stored(progress.offsets)
    if stored is None:
        return job.stream.starting_offsets
    count = partition_count(job.kafka, job.stream.topic)
    if count is None:  # no such topic (deleted since): the query's own error says so
        return stored.as_json()
    return naming_partitions(stored, {job.stream.topic: range(count)}).as_json()


def start(spark, job: JobConfig, seams: BatchSeams = SHIPPED) -> RunningStream:
    """Provision the store, take its lease, check the checkpoint, start the query over the
    job's topic. `seams`: see BatchSeams (benchmarks time or swap a batch's steps there; the
    job as shipped does not)."""
    records = json_input_of(job.stream)
    if records is not None:
        check_json_input(spark, records)
    return start_query(
        spark,
        job,
        lambda starting: _kafka_source(spark, job, starting),
        records,
        seams,
        name=f"wordcount-{job.stream.store}",
    )


def start_query(
    spark,
    job: JobConfig,
    read: Callable[[str], object],
    records: InputStage | None,
    seams: BatchSeams = SHIPPED,
    *,
    name: str,
) -> RunningStream:
    """Provision the store, take its lease, check the checkpoint against the store's registry
    row, then run the streaming DataFrame `read(starting)` through foreachBatch (BatchApplier).
    `starting`: where a new checkpoint starts reading (the store's position with
    --recover-from-store, else --starting-offsets). `records`: the input stage of JSON records
    (json_input.JsonInput, or a user's own query: statestore.stream.own_query), None for text
    lines. Nothing is written before the lease and the checkpoint checks pass."""
    session = session_for(job.cassandra)
    # Executors on other machines open the TLS files too: ship them (conn.cassandra.local_copy).
    for path in tls_files(job.cassandra):
        spark.sparkContext.addFile(path)
    spec = with_retries(job.cassandra, "preparing the store", lambda: resolve_store(session, job))
    monitor = StreamMonitor(job.cassandra, spec)
    monitor.ensure_tables()
    lease = StoreLease(session, spec.keyspace, spec.name, job.stream.checkpoint, job.stream.lease_ttl_s)
    monitor.writer = lease.holder  # on every row of this run, so its rows are told from another run's
    monitor.state(stream_log.STARTING)
    monitor.state(stream_log.WAITING_FOR_LEASE)
    try:
        with_retries(job.cassandra, "taking the store's lease", lease.acquire)
    except BaseException as exc:
        # Refused (another writer holds the store): recorded, but not the store's state.
        monitor.state(stream_log.REFUSED if isinstance(exc, LeaseHeldError) else stream_log.FAILED, str(exc))
        raise
    lease.start_renewing()
    try:
        # Fencing: from here on, the store's earlier writers can record nothing (registry doc).
        epoch = with_retries(job.cassandra, "taking the store's epoch", lambda: registry.take_epoch(session, spec))
        # The store's table again, now that the epoch is this run's: a relayout whose swap was
        # accepted but not committed when its process died (its lightweight transaction timed out)
        # commits at the latest in take_epoch's own Paxos round on the registry row, after the read
        # above found the old table; counts written there would be lost without an error. Only a
        # store that moved is resolved again.
        settled = with_retries(
            job.cassandra, "reading the store's table", lambda: registry.lookup(session, spec.keyspace, spec.name)
        )
        if settled.table_name != spec.table_name:
            spec = with_retries(job.cassandra, "preparing the store", lambda: resolve_store(session, job))
        _fence_taken_over_batch(session, job, spec, epoch)
        source = SourceTopic(job.stream.topic, TopicIds(job.kafka))
        writer = StoreWriter(
            job.cassandra,
            spec,
            epoch,
            seams,
            driver_records=job.stream.driver_apply_records,
            max_future_ms=job.stream.max_future_ms,
            apply_cache=job.stream.apply_cache,
            json_input=records,
        )
        applier = BatchApplier(writer, QueryCheckpoint(spark, job.stream.checkpoint), lease, source, monitor)
        starting = with_retries(
            job.cassandra,
            "checking the checkpoint",
            lambda: _check_checkpoint(session, job, applier, monitor, source),
        )
        stream_writer = (
            read(starting)
            .writeStream.queryName(name)
            .option("checkpointLocation", job.stream.checkpoint)
            .foreachBatch(applier)
        )
        if job.stream.trigger == "available-now":
            stream_writer = stream_writer.trigger(availableNow=True)
        else:
            stream_writer = stream_writer.trigger(processingTime=f"{cfg.trigger_seconds(job.stream.trigger)} seconds")
        # The id is known only once the query exists; batches wait for it (see BatchApplier).
        query = stream_writer.start()
        applier.query_id, monitor.run_id = str(query.id), str(query.runId)
        # Before batches may proceed: the first one's own `running` row comes after this one.
        monitor.state(stream_log.RUNNING, "query started")
        applier.started.set()
    except BaseException as exc:
        lease.release()
        monitor.state(stream_log.FAILED, _store_error_message(exc) or str(exc))
        raise
    return RunningStream(query, applier, lease, monitor)


def parse_args(argv: Sequence[str] | None, env=None) -> JobConfig:
    parser = argparse.ArgumentParser(
        prog="wordcount_stream", description="Count words from a Kafka topic into a Cassandra store."
    )
    for section in (StreamConfig, CassandraConfig, KafkaConfig):
        cfg.add_arguments(parser, section)
    args = parser.parse_args(argv)
    return JobConfig(
        stream=cfg.from_args(StreamConfig, args, env),
        cassandra=cfg.from_args(CassandraConfig, args, env),
        kafka=cfg.from_args(KafkaConfig, args, env),
    )


def run(job: JobConfig) -> int:

    spark = build_session(f"statestore-wordcount-{job.stream.store}")
    stream = start(spark, job)
    failure = None
    try:
        stream.query.awaitTermination()
    except KeyboardInterrupt:  # stopped by its user: recorded as stopped, not failed
        raise
    except BaseException as exc:
        failure = _store_error_message(exc) or str(exc) or type(exc).__name__
        raise
    finally:
        stream.stop(failure)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        return run(parse_args(argv))
    except (StateStoreError, ConfigError) as exc:
        print(f"wordcount_stream: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the job's last resort: report and exit non-zero
        # Our error raised inside a batch comes back as Spark's StreamingQueryException: still a
        # clear store error (exit 2, as when it is raised before the stream starts).
        ours = _store_error_message(exc)
        print(f"wordcount_stream: {ours or exc}", file=sys.stderr)
        return 1 if ours is None else 2


# Our errors that say on their own why a stream stopped (any other error is shown whole).
_STORE_ERRORS = (CheckpointMismatchError, CassandraUnavailableError, LeaseLostError, StoreFencedError)


def _store_error_message(exc: BaseException) -> str | None:
    """The message of our error that stopped the stream, or None when it was none of ours:
    by type when it was raised in this Python process, else from the text Spark gives."""
    if isinstance(exc, _STORE_ERRORS):
        return str(exc)
    return _store_error_in_text(str(exc))


def _store_error_in_text(message: str) -> str | None:
    """Our error's message in the text of an error Spark raised, or None.

    An error raised in foreachBatch (BatchApplier) crosses the JVM: Spark fails the query and
    awaitTermination raises Spark's own StreamingQueryException, whose message holds the Python
    traceback as text. The error's type does not survive that trip, so here, and only here, it
    is recognised by its class name in the text."""
    for line in message.splitlines():
        for error in _STORE_ERRORS:
            marker = f"{error.__name__}:"
            if marker in line:
                return line.split(marker, 1)[1].strip()
    return None
