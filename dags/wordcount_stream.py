"""wordcount_stream: submit the streaming word count (jobs/wordcount_stream.py) with spark-submit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, Param, task
from statestore_airflow import dag_support
from statestore_airflow.spark_conf import ALLOWED_SPARK_CONF, checked_spark_conf

DOC = """
### Word count stream: Kafka -> Spark -> Cassandra store

Submits `jobs/wordcount_stream.py` through the stock **SparkSubmitOperator** (connection
`spark_default`, e.g. `local[*]` or `spark://master:7077`; its `spark-binary` must be
`spark-submit`). The Kafka connector goes with `--jars` (the local stack's, or
`STATESTORE_SPARK_JARS`) or else `--packages`; the library goes to the executors as a
`--py-files` zip built when the run starts.

Connections: `statestore_cassandra` (type `statestore`, or `cassandra` of earlier releases: hosts,
port, keyspace in *schema*, TLS and consistency in *extra*) and `statestore_kafka` (host = bootstrap servers; login /
password = SASL user; *extra*: `security_protocol`, `sasl_mechanism`, `password_file`, `ssl_ca`,
`ssl_cert`, `ssl_key`, `check_hostname`). The Cassandra and Kafka passwords reach spark-submit in
its environment, never on its command line.

**Trigger** `available-now` processes what the topic holds and ends; an interval such as
`10s` runs until the task is stopped. **Checkpoint** defaults to
`$STATESTORE_CHECKPOINT_DIR/<store>`.

**Spark conf** takes sizes, counts and timeouts only (`statestore_airflow.spark_conf`):
memory and cores of the driver and executors, executor instances, `spark.cores.max`,
`spark.task.cpus`, shuffle partitions and parallelism, adaptive execution on or off, memory
fractions, dynamic allocation and its bounds, locality wait and network timeouts. Any other
key (Java options, class names, paths, URLs, files, environment) fails the run at once, before
anything is submitted: spark-submit runs on the Airflow worker.

**Clearing or killing the task** stops spark-submit (the operator's `on_kill`). The store
stays exact: one writer per store (a lease in Cassandra), so a re-run with the same
checkpoint waits for the stopped driver's lease to lapse (its TTL, 30 s by default) and
continues from the checkpoint; a half-applied batch is replayed without double counting.
A second, concurrent run is impossible (`max_active_runs=1`), and a stream with another
checkpoint is refused while the first holds the store.
"""

STORE_TYPES = [
    "auto",
    "partitioned-kv",
    "global-kv",
    "partitioned-versioned",
    "global-versioned",
    "partitioned-window",
    "partitioned-session",
]
WINDOW_PARAMS = ("window", "hop", "session_gap", "grace", "retention")
JSON_PARAMS = ("aggregate", "key", "key_expr", "time_field")  # with input_format json (StreamConfig checks)
# Durations as the job takes them (statestore.core.durations.parse_duration): 90s, 1m, 2h, 7d.
DURATION = r"^[0-9]+(ms|s|m|h|d)$"


def _duration_param(title: str, description: str) -> Param:
    return Param(None, type=["null", "string"], pattern=DURATION, title=title, description=description)


with DAG(
    dag_id="wordcount_stream",
    description="Stream word counts from Kafka into a Cassandra state store (spark-submit)",
    doc_md=DOC,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,  # it runs only when triggered; paused, a triggered run waits queued
    tags=["statestore", "streaming", "spark"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=45), "owner": "statestore"},
    params={
        "topic": dag_support.topic_param("sample-lines"),
        "store": dag_support.store_param("sample"),
        "store_type": Param(
            "auto",
            type="string",
            enum=STORE_TYPES,
            title="Store type",
            description="auto: the existing store's type, else partitioned-window with a window, partitioned-session "
            "with a session gap, else partitioned-kv",
        ),
        "partitions": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Store partitions (new stores)",
            description="empty: the topic's partition count",
        ),
        "trigger": dag_support.trigger_param(),
        "checkpoint": dag_support.checkpoint_param(),
        "starting_offsets": Param(
            "earliest",
            type="string",
            enum=["earliest", "latest"],
            title="Starting offsets (new checkpoints)",
            description="where a stream with a new checkpoint starts reading the topic",
        ),
        "max_offsets_per_trigger": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Max records per batch",
            description="empty: no limit; else at most this many Kafka records per micro-batch",
        ),
        "recover_from_store": Param(
            False,
            type="boolean",
            title="Recover from the store",
            description="with a new checkpoint, continue from the store's recorded position",
        ),
        "apply_cache": Param(
            True,
            type="boolean",
            title="Apply cache",
            description="executors keep each batch's writes and read only what they cannot vouch for; "
            "turn off when other programs write the store while the stream runs",
        ),
        "driver_apply_records": Param(
            1000,
            type="integer",
            minimum=0,
            title="Driver apply: largest batch (records)",
            description="a micro-batch of at most this many Kafka records is applied by the driver, with no "
            "Python tasks; 0: every batch on the executors",
        ),
        "max_future": Param(
            "5m",
            type="string",
            pattern=DURATION,
            title="Max future (event time ahead of the clock)",
            description="how far a record's Kafka time may be ahead of its batch's clock; a record further ahead "
            "(a producer whose clock is wrong) is dead-lettered with reason future, counted nowhere, and moves no "
            "stream time",
        ),
        "compaction": Param(
            "default",
            type="string",
            enum=["default", "ucs", "lcs", "stcs", "twcs"],
            title="Compaction (new stores)",
            description="the compaction strategy of a store this run creates; default: the store type's "
            "(UCS for key-value stores, TWCS for window and session stores); lcs: the seed library's; an "
            "existing store keeps its own",
        ),
        "window": _duration_param(
            "Window (windowed counts)",
            "empty: count per word forever; a duration such as 1m: count per word and event-time window of that "
            "size (Kafka record timestamps, json: the time field's; windows aligned to the epoch, into a "
            "partitioned-window store)",
        ),
        "hop": _duration_param(
            "Hop (with a window)", "empty: tumbling windows; a shorter duration: windows start every hop and overlap"
        ),
        "session_gap": _duration_param(
            "Session gap (sessioned counts)",
            "empty: no sessions; a duration such as 5m: count per word and session (its records no further apart "
            "than the gap, by Kafka record timestamps) into a partitioned-session store; not with a window",
        ),
        "grace": _duration_param(
            "Grace (with a window or session gap)",
            "empty or 0s: none; how long after its end a window still counts late records (later ones are "
            "dead-lettered with reason late)",
        ),
        "retention": _duration_param(
            "Retention (with a window or session gap)",
            "empty: the larger of window (gap) + grace and 1d; how long windows (sessions) are kept, by stream time",
        ),
        "input_format": Param(
            "text",
            type="string",
            enum=["text", "json"],
            title="Input format",
            description="text: lines, counted by word (the word count); json: one JSON object per record, its "
            "measures (aggregate) kept per key",
        ),
        "aggregate": Param(
            None,
            type=["null", "string"],
            title="Aggregate (json)",
            description="the measures kept per key (with a window: per key and window), e.g. n=count(), "
            "total=sum_int(amount), hi=max(amount)",
        ),
        "key": Param(
            None,
            type=["null", "string"],
            title="Key field(s) (json)",
            description="FIELD[,FIELD...]: one field's value as text, several as a JSON array; nested: a.b",
        ),
        "key_expr": Param(
            None,
            type=["null", "string"],
            title="Key expression (json, instead of the key fields)",
            description="a Spark SQL expression over the parsed record, e.g. concat(record:shop::string, '/', "
            "record:user::string)",
        ),
        "time_field": Param(
            None,
            type=["null", "string"],
            title="Time field (json)",
            description="empty: the Kafka record timestamp; else the field of epoch milliseconds or ISO-8601 time",
        ),
        "spark_conf": Param(
            {},
            type="object",
            propertyNames={"enum": sorted(ALLOWED_SPARK_CONF)},
            title="Extra Spark settings (--conf)",
            description='sizes, counts and timeouts only, e.g. {"spark.executor.memory": "2g"}; allowed: '
            + ", ".join(sorted(ALLOWED_SPARK_CONF)),
        ),
    },
) as dag:

    @task(multiple_outputs=True)
    def prepare_submission(params: dict) -> dict:
        """Check the parameters with the job's own rules and build the spark-submit arguments."""
        from airflow.sdk import BaseHook
        from statestore_airflow.hook import CassandraStateStoreHook

        from statestore.core.config import StreamConfig
        from statestore.core.durations import format_duration, parse_duration

        with dag_support.fail_without_retry():
            spark_conf = checked_spark_conf(params["spark_conf"])  # before anything else: no Java options
            checkpoint = params["checkpoint"] or str(dag_support.checkpoint_root() / params["store"])
            stream = StreamConfig(
                topic=params["topic"],
                store=params["store"],
                checkpoint=checkpoint,
                store_type=None if params["store_type"] == "auto" else params["store_type"],
                partitions=params["partitions"],
                trigger=params["trigger"],
                starting_offsets=params["starting_offsets"],
                max_offsets_per_trigger=params["max_offsets_per_trigger"],
                recover_from_store=params["recover_from_store"],
                apply_cache=params.get("apply_cache", True),
                driver_apply_records=params.get("driver_apply_records", 1000),
                max_future_ms=parse_duration(params.get("max_future") or "5m", "max_future"),
                compaction=None if params.get("compaction", "default") == "default" else params["compaction"],
                input_format=params.get("input_format") or "text",
                **{name: params[name] for name in JSON_PARAMS if params.get(name)},
                **{
                    name: parse_duration(params[name], name, zero=name == "grace")
                    for name in WINDOW_PARAMS
                    if params.get(name)
                },
            )
            cassandra = CassandraStateStoreHook(dag_support.CASSANDRA_CONN_ID).config
            kafka = dag_support.kafka_args(BaseHook.get_connection(dag_support.KAFKA_CONN_ID))
        args = ["--topic", stream.topic, "--store", stream.store, "--checkpoint", stream.checkpoint]
        args += ["--trigger", stream.trigger, "--starting-offsets", stream.starting_offsets]
        args += ["--max-future", format_duration(stream.max_future_ms)]
        if stream.input_format != "text":
            args += ["--input-format", stream.input_format]
        for flag, value in (
            ("--store-type", stream.store_type),
            ("--partitions", stream.partitions),
            ("--max-offsets-per-trigger", stream.max_offsets_per_trigger),
            ("--driver-apply-records", stream.driver_apply_records),
            ("--compaction", stream.compaction),
            ("--aggregate", stream.aggregate),
            ("--key", stream.key),
            ("--key-expr", stream.key_expr),
            ("--time-field", stream.time_field),
        ):
            if value is not None:
                args += [flag, str(value)]
        for name in WINDOW_PARAMS:
            if getattr(stream, name) is not None:
                args += [f"--{name.replace('_', '-')}", format_duration(getattr(stream, name))]
        if stream.recover_from_store:
            args.append("--recover-from-store")
        if not stream.apply_cache:
            args.append("--no-apply-cache")
        args += [*kafka, *dag_support.cassandra_args(cassandra)]
        return dag_support.spark_submission(args, spark_conf, dag_support.spark_master())

    # The operator resolves these XCom references when it runs: lists and dicts stay as they are.
    submission = prepare_submission()
    dag_support.spark_submit_task("run_stream", "wordcount_stream.py", "wordcount-{{ params.store }}", submission)
