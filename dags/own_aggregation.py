"""own_aggregation: submit the example of your own query (jobs/own_aggregation.py) with spark-submit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, Param, task
from statestore_airflow import dag_support
from statestore_airflow.spark_conf import ALLOWED_SPARK_CONF, checked_spark_conf

DOC = """
### Your own query: JSON orders -> filter -> join -> aggregate store

Submits `jobs/own_aggregation.py`, the example of a query of your own kept exactly once in an
aggregate store (`statestore.stream.start_aggregation`, docs/aggregations.md): JSON orders from
the topic, cancelled ones left out, each joined with its shop's region from a small static table
(**Shops CSV**, a file with a header `shop,region` the driver can read; empty: 12 example shops),
kept per `region/shop` as orders, revenue, biggest order, distinct customers and last order. An
order of a shop the table does not know is a dead letter `missing_key`.

It goes through the stock **SparkSubmitOperator** with the connections of `wordcount_stream`
(`statestore_cassandra`, `statestore_kafka`, `spark_default`); passwords reach spark-submit in
its environment, never on its command line. **Trigger** `available-now` processes what the
topic holds and ends; an interval such as `10s` runs until the task is stopped. **Checkpoint**
defaults to `$STATESTORE_CHECKPOINT_DIR/<store>`. One writer per store (its lease): a re-run
with the same checkpoint continues where the last one stopped, a half-applied batch replayed
without double counting. Copy this DAG and the job as the start of your own.
"""

with DAG(
    dag_id="own_aggregation",
    description="Keep measures of your own Spark query of a Kafka topic in a Cassandra aggregate store",
    doc_md=DOC,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,  # it runs only when triggered; paused, a triggered run waits queued
    tags=["statestore", "streaming", "spark", "example"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=45), "owner": "statestore"},
    params={
        "topic": dag_support.topic_param("sample-orders"),
        "store": dag_support.store_param("orders_by_shop"),
        "shops": Param(
            None,
            type=["null", "string"],
            title="Shops CSV",
            description="a CSV file with a header shop,region; empty: 12 example shops (s0..s11)",
        ),
        "trigger": dag_support.trigger_param(),
        "checkpoint": dag_support.checkpoint_param(),
        "max_offsets_per_trigger": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Max records per batch",
            description="empty: no limit; else at most this many Kafka records per micro-batch",
        ),
        "spark_conf": Param(
            {},
            type="object",
            propertyNames={"enum": sorted(ALLOWED_SPARK_CONF)},
            title="Extra Spark settings (--conf)",
            description='sizes, counts and timeouts only, e.g. {"spark.executor.memory": "2g"}',
        ),
    },
) as dag:

    @task(multiple_outputs=True)
    def prepare_submission(params: dict) -> dict:
        """Check the parameters and build the spark-submit arguments."""
        from airflow.sdk import BaseHook
        from statestore_airflow.hook import CassandraStateStoreHook

        from statestore.core.names import validate_store_name, validate_topic

        with dag_support.fail_without_retry():
            spark_conf = checked_spark_conf(params["spark_conf"])  # before anything else: no Java options
            store, topic = validate_store_name(params["store"]), validate_topic(params["topic"])
            checkpoint = params["checkpoint"] or str(dag_support.checkpoint_root() / store)
            cassandra = CassandraStateStoreHook(dag_support.CASSANDRA_CONN_ID).config
            kafka = dag_support.kafka_args(BaseHook.get_connection(dag_support.KAFKA_CONN_ID))
        args = ["--topic", topic, "--store", store, "--checkpoint", checkpoint, "--trigger", params["trigger"]]
        if params.get("shops"):
            args += ["--shops", params["shops"]]
        if params.get("max_offsets_per_trigger"):
            args += ["--max-offsets-per-trigger", str(params["max_offsets_per_trigger"])]
        args += [*kafka, *dag_support.cassandra_args(cassandra)]
        return dag_support.spark_submission(args, spark_conf, dag_support.spark_master())

    # The operator resolves these XCom references when it runs: lists and dicts stay as they are.
    submission = prepare_submission()
    dag_support.spark_submit_task("run_query", "own_aggregation.py", "own-aggregation-{{ params.store }}", submission)
