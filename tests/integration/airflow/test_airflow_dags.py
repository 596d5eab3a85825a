"""dag.test() of the DAGs against the local stack: the admin actions, and the word count through
a real spark-submit (killed mid-stream, then run again: exact counts, nothing counted twice)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import tests.airflow_env as airflow_env

# isort: split
import pytest

from statestore.store.book import registry, schema
from statestore.store.builder import open_store, open_window_store
from tests.corpus import generate
from tests.integration.conftest import compaction_class_of, dump, produce_lines, wait_for_lease_to_lapse


@pytest.fixture(scope="module")
def dags():
    airflow_env.migrate_db()
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(airflow_env.DAGS), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags


@pytest.fixture
def connections(cassandra_config, kafka_config, monkeypatch, tmp_path):
    """The AIRFLOW_CONN_* variables `make airflow` sets, pointed at the test keyspace."""
    cassandra = {
        "conn_type": "statestore",
        "host": ",".join(cassandra_config.hosts),
        "port": cassandra_config.port,
        "schema": cassandra_config.keyspace,
    }
    monkeypatch.setenv("AIRFLOW_CONN_STATESTORE_CASSANDRA", json.dumps(cassandra))
    kafka = {"conn_type": "generic", "host": kafka_config.bootstrap_servers}
    monkeypatch.setenv("AIRFLOW_CONN_STATESTORE_KAFKA", json.dumps(kafka))
    spark = {"conn_type": "spark", "host": "local[2]", "extra": {"spark-binary": "spark-submit"}}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(spark))
    # The venv's spark-submit (pyspark's) and Python, as `make airflow` puts them on PATH.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STATESTORE_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    return tmp_path


def _result(dag_run, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key="return_value")
        row = session.scalars(query).first()
        return None if row is None else XComModel.deserialize_value(row)


def _admin(dags, **conf):
    run = dags["state_store_admin"].test(run_conf=conf)
    return run.state, _result(run, "run_action")


def test_state_store_admin_create_describe_alter_truncate_drop(dags, connections, session, keyspace, store_name):
    state, created = _admin(dags, action="create", store=store_name, partitions=3, options={"ttl": 3600})
    assert state == "success"
    assert (created["type"], created["partitions"], created["table_options"]["default_time_to_live"]) == (
        "partitioned-kv",
        3,
        3600,
    )
    open_store(session, keyspace, store_name).put_all([(f"k{i}", i) for i in range(30)])

    state, described = _admin(dags, action="describe", store=store_name)
    assert state == "success"
    assert sum(described["entries_per_partition"]) == 30 and len(described["entries_per_partition"]) == 3
    assert "PRIMARY KEY (partition, key)" in described["schema_cql"]

    state, altered = _admin(dags, action="alter", store=store_name, options={"ttl": 60})
    assert state == "success" and altered["table_options"]["default_time_to_live"] == 60
    session.cluster.refresh_table_metadata(keyspace, f"{store_name}_store")
    assert (
        session.cluster.metadata.keyspaces[keyspace].tables[f"{store_name}_store"].options["default_time_to_live"] == 60
    )

    state, _ = _admin(dags, action="truncate", store=store_name)
    assert state == "success"
    assert list(open_store(session, keyspace, store_name).all()) == []

    # A drop without the store's name as confirmation fails (at once, no retry) and drops nothing;
    # so does one with the form's confirmation left empty (optional on the form, checked here).
    state, _ = _admin(dags, action="drop", store=store_name, confirm="yes")
    assert state == "failed"
    state, _ = _admin(dags, action="drop", store=store_name)
    assert state == "failed"
    assert registry.find(session, keyspace, store_name) is not None

    state, dropped = _admin(dags, action="drop", store=store_name, confirm=store_name)
    assert (state, dropped) == ("success", {"dropped": store_name, "table": f"{store_name}_store"})
    assert registry.find(session, keyspace, store_name) is None
    state, listed = _admin(dags, action="list")
    assert state == "success" and store_name not in {s["store"] for s in listed}


# Run beside dag.test() as its own process (dag.test() owns this one's main thread): waits
# until Spark has committed the stream's first batch, then SIGKILLs that stream's spark-submit
# JVM by its pid, as the operator's on_kill does when Airflow stops a cleared task.
KILL_AFTER_FIRST_BATCH = """
import os, signal, sys, time
checkpoint = sys.argv[1]
deadline = time.monotonic() + 300
while not os.path.exists(os.path.join(checkpoint, "commits", "0")) and time.monotonic() < deadline:
    time.sleep(0.5)
def argv(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\\0")
    except OSError:
        return []
pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
pids = [p for p in pids if "org.apache.spark.deploy.SparkSubmit" in argv(p) and checkpoint in argv(p)]
for pid in pids:
    os.kill(pid, signal.SIGKILL)
print(len(pids))
"""


def test_wordcount_stream_killed_then_rerun_counts_exactly(
    dags, connections, session, keyspace, kafka_config, topic, store_name
):
    dag = dags["wordcount_stream"]
    first, first_truth = generate(2000, seed=21)
    produce_lines(kafka_config, topic, first)
    checkpoint = connections / "checkpoints" / store_name

    # 1. A never-ending stream (interval trigger), killed as Airflow kills a cleared task:
    #    SIGKILL to spark-submit. The task's last try fails; the store keeps what it applied.
    #    dag.test() runs in this (the main) thread, as Airflow's signal handling requires.
    dag.get_task("run_stream").retries = 0  # this copy of the DAG only: no retry after the kill
    checkpoint.parent.mkdir(parents=True)
    killer = subprocess.Popen(
        [sys.executable, "-c", KILL_AFTER_FIRST_BATCH, str(checkpoint)], stdout=subprocess.PIPE, text=True
    )
    try:
        killed = dag.test(run_conf={"topic": topic, "store": store_name, "trigger": "1s"})
    finally:
        killed_pids = killer.communicate(timeout=400)[0].strip()
    assert killed_pids == "1", "the stream's spark-submit was not found to be killed"
    assert killed.state == "failed"
    assert dump(session, keyspace, store_name) == dict(first_truth)
    wait_for_lease_to_lapse(session, keyspace, store_name, whose="the killed writer's")

    # 2. More input, then a re-run with the available-now trigger and the same checkpoint:
    #    it continues where the killed run stopped, and every word is counted exactly once.
    more, more_truth = generate(1000, seed=22)
    produce_lines(kafka_config, topic, more)
    #    The form's driver_apply_records 0 sends the 1,000 new lines to the executors, which
    #    the default (1,000) would have applied on the driver.
    rerun = dag.test(
        run_conf={"topic": topic, "store": store_name, "trigger": "available-now", "driver_apply_records": 0}
    )
    assert rerun.state == "success"
    assert dump(session, keyspace, store_name) == dict(first_truth + more_truth)


def test_wordcount_stream_counts_in_the_windows_the_trigger_form_asks_for(
    dags, connections, session, keyspace, kafka_config, topic, store_name
):
    minute = 60_000
    base = 1_767_225_600_000  # a whole minute
    _produce_at(kafka_config, topic, ["heron reed", "heron"], base + 5_000)
    _produce_at(kafka_config, topic, ["heron"], base + minute + 59_000)
    # The form's compaction reaches the table the run creates (a window store's default is TWCS).
    conf = {"topic": topic, "store": store_name, "window": "1m", "hop": "30s", "grace": "0s", "compaction": "ucs"}
    # A DAG of its own (`dags` only set up the database): dag.test() keeps a run's conf in its
    # tasks' params, where the other tests' runs of the module-wide DAG would find it.
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(airflow_env.DAGS), safe_mode=False).dags["wordcount_stream"]
    assert dag.test(run_conf=conf).state == "success"
    spec = registry.lookup(session, keyspace, store_name)
    assert spec.store_type.value == "partitioned-window"
    assert (spec.windowing.size_ms, spec.windowing.hop_ms, spec.windowing.grace_ms) == (minute, 30_000, 0)
    assert compaction_class_of(session, keyspace, spec.table).endswith("UnifiedCompactionStrategy")
    stored = {(w.key, w.start_ms - base): w.value for w in open_window_store(session, keyspace, store_name).all()}
    # 0:05 falls in the windows starting -0:30 (before base) and 0:00; 1:59 in 1:00 and 1:30.
    assert stored == {
        ("heron", -30_000): 2,
        ("heron", 0): 2,
        ("reed", -30_000): 1,
        ("reed", 0): 1,
        ("heron", minute): 1,
        ("heron", minute + 30_000): 1,
    }


def _produce_at(kafka_config, topic: str, lines: list[str], timestamp_ms: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka_config.bootstrap_servers})
    for line in lines:
        producer.produce(topic, line.encode(), timestamp=timestamp_ms)
    assert producer.flush(30) == 0


def test_state_maintenance_end_to_end(dags, connections, session, keyspace, kafka_config, topic, store_name):
    """Stream into a store, then the scheduled maintenance: expiry by stream time removes the
    words last seen 10 days before the stream's time, and the other jobs leave the store
    exact; a wrong count then fails validation (and the run), naming the key."""
    import time

    now_ms = int(time.time() * 1000)
    _produce_at(kafka_config, topic, [f"ancient{i} shared" for i in range(40)], now_ms - 10 * 86_400_000)
    _produce_at(kafka_config, topic, [f"fresh{i % 25} shared" for i in range(100)], now_ms)
    assert dags["wordcount_stream"].test(run_conf={"topic": topic, "store": store_name}).state == "success"
    assert dump(session, keyspace, store_name)["shared"] == 140
    kept = {**{f"fresh{i}": 4 for i in range(25)}, "shared": 140}
    reports = connections / "reports"
    os.environ["STATESTORE_REPORT_DIR"] = str(reports)  # the connections fixture's monkeypatch undoes the rest
    try:
        run = dags["state_maintenance"].test(
            run_conf={"stores": [store_name], "retention": "2d", "token_ranges": 4, "replay_batches": 1}
        )
        assert run.state == "success"
        assert dump(session, keyspace, store_name) == kept  # exactly the ancient words expired
        expired = json.loads((reports / "expire_state.json").read_text())["stores"][0]
        assert (expired["store"], expired["removed"], expired["kept"]) == (store_name, 40, 26)
        assert json.loads((reports / "audit_partitions.json").read_text())["status"] == "ok"
        assert json.loads((reports / "compact_state.json").read_text())["stores"][0]["store"] == store_name
        validated = reports / "validate_idempotency" / store_name
        assert json.loads((validated / "validate_idempotency.json").read_text())["status"] == "pass"
        assert (validated / "data_docs").is_dir()
        published = _result(run, "publish_reports")
        assert sorted(published) == ["audit_partitions", "compact_state", "expire_state", "validate_idempotency"]

        # A wrong count: validation alone (the `jobs` param) fails at once (no retry) and names
        # the key; the run fails, and the jobs left out wrote nothing.
        open_store(session, keyspace, store_name).put("fresh3", 5)
        run_conf = {"stores": [store_name], "replay_batches": 0, "jobs": ["validate_idempotency"]}
        run = dags["state_maintenance"].test(run_conf=run_conf)
        assert run.state == "failed"
        report = json.loads((validated / "validate_idempotency.json").read_text())
        assert report["status"] == "fail" and "fresh3" in json.dumps(report["recompute"])
        published = _result(run, "publish_reports")
        assert list(published) == ["validate_idempotency"] and published["validate_idempotency"][0]["status"] == "fail"
    finally:
        os.environ.pop("STATESTORE_REPORT_DIR", None)


def test_state_store_admin_relayout_then_drop_old_table(dags, connections, session, keyspace, store_name):
    state, created = _admin(dags, action="create", store=store_name, partitions=2, subpartitions=4)
    assert state == "success" and (created["subpartitions"], created["table"]) == (4, f"{store_name}_store")
    open_store(session, keyspace, store_name).put_all([(f"k{i}", i) for i in range(50)])

    state, moved = _admin(dags, action="relayout", store=store_name, subpartitions=8)
    assert state == "success"
    assert (moved["entries"], moved["old_subpartitions"], moved["new_subpartitions"]) == (50, 4, 8)
    assert moved["new_table"] == f"{store_name}_store_r1" and moved["old_table_kept"]
    assert dict(open_store(session, keyspace, store_name).all()) == {f"k{i}": i for i in range(50)}

    old = f"{store_name}_store"
    state, _ = _admin(dags, action="drop_old_table", store=store_name, table=old, confirm="yes")
    assert state == "failed"  # the store's name is the confirmation
    state, dropped = _admin(dags, action="drop_old_table", store=store_name, table=old, confirm=store_name)
    assert (state, dropped) == ("success", {"dropped": f"{keyspace}.{old}"})


def test_state_store_admin_migrates_a_store_of_an_earlier_release(dags, connections, session, keyspace, store_name):
    state, _ = _admin(dags, action="create", store=store_name, partitions=2)
    assert state == "success" and schema.stored_version(session, keyspace, store_name) == schema.SCHEMA_VERSION
    # As a release before schema versions left it: no version recorded.
    session.execute(f"UPDATE {keyspace}.statestore_stores SET schema_version = null WHERE name = %s", (store_name,))
    assert schema.stored_version(session, keyspace, store_name) == schema.BEFORE_VERSIONS

    state, migrated = _admin(dags, action="migrate", store=store_name)
    to = schema.SCHEMA_VERSION
    assert (state, migrated) == ("success", [{"store": store_name, "from": 1, "to": to, "added": []}])
    assert schema.stored_version(session, keyspace, store_name) == schema.SCHEMA_VERSION
    state, everything = _admin(dags, action="migrate")  # no store: every store of the keyspace
    assert state == "success" and {"store": store_name, "from": to, "to": to, "added": []} in everything
