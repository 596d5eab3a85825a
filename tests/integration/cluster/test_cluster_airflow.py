"""Airflow on the cluster: the wordcount_stream DAG, run with dag.test(), submits to the
standalone master through a `spark_default` connection pointing at spark://, and the store
on the 3-node cluster ends exact."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import tests.airflow_env as airflow_env

# isort: split
from cassandra import ConsistencyLevel

from tests.corpus import generate
from tests.integration.cluster.conftest import counts_at
from tests.integration.conftest import produce_lines


def test_wordcount_stream_dag_submits_to_the_standalone_master(
    cluster, cluster_cassandra, cluster_kafka, cluster_topic, store_name, monkeypatch, tmp_path
):
    airflow_env.migrate_db()
    from airflow.dag_processing.dagbag import DagBag

    cassandra = {
        "conn_type": "statestore",
        "host": ",".join(cluster_cassandra.hosts),
        "port": cluster_cassandra.port,
        "schema": cluster_cassandra.keyspace,
        "extra": {"local_dc": "dc1"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_STATESTORE_CASSANDRA", json.dumps(cassandra))
    monkeypatch.setenv(
        "AIRFLOW_CONN_STATESTORE_KAFKA", json.dumps({"conn_type": "generic", "host": cluster_kafka.bootstrap_servers})
    )
    spark = {"conn_type": "spark", "host": cluster.SPARK_MASTER_URL, "extra": {"spark-binary": "spark-submit"}}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(spark))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STATESTORE_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the driver listens where the workers reach it
    # Nothing tells the executors to run this machine's venv: they use the workers' Python.
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("STATESTORE_EXECUTOR_PYTHON", raising=False)

    bag = DagBag(dag_folder=str(airflow_env.DAGS), safe_mode=False)
    lines, truth = generate(2_000, seed=1801)
    produce_lines(cluster_kafka, cluster_topic, lines)
    started = time.time()
    run = bag.dags["wordcount_stream"].test(
        run_conf={"topic": cluster_topic, "store": store_name, "spark_conf": {"spark.executor.memory": "768m"}}
    )
    assert run.state == "success"
    assert counts_at("127.0.0.3", cluster_cassandra.keyspace, store_name, ConsistencyLevel.ALL) == dict(truth)
    for worker in ("spark-worker-1", "spark-worker-2"):
        shipped = list((cluster.CLUSTER / worker / "work").glob("app-*/*/statestore-*.zip"))
        assert any(path.stat().st_mtime >= started for path in shipped), f"no executor of the DAG's job on {worker}"
