"""The job as users run it: through spark-submit, and with a processing-time trigger."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from statestore.config import StreamConfig
from statestore.spark import connector_jars
from statestore.wordcount import JobConfig, start
from tests.corpus import generate
from tests.integration.conftest import dump, produce_lines

PROJECT = Path(__file__).resolve().parents[2]


def _spark_submit(*job_args: str) -> subprocess.CompletedProcess:
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}"}
    return subprocess.run(
        [
            "spark-submit",
            "--master",
            "local[2]",
            "--jars",
            ",".join(connector_jars()),
            str(PROJECT / "jobs" / "wordcount_stream.py"),
            *job_args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_spark_submit_counts_the_topic(session, keyspace, kafka_config, topic, store_name, tmp_path):
    lines, truth = generate(400, seed=31)
    produce_lines(kafka_config, topic, lines)
    result = _spark_submit(
        "--topic",
        topic,
        "--store",
        store_name,
        "--checkpoint",
        str(tmp_path / "cp"),
        "--keyspace",
        keyspace,
        "--store-type",
        "global-kv",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert dump(session, keyspace, store_name) == dict(truth)


def test_spark_submit_rejects_bad_arguments_clearly(tmp_path):
    result = _spark_submit("--topic", "t", "--store", "Robert'); DROP TABLE x;--", "--checkpoint", str(tmp_path / "cp"))
    assert result.returncode == 2
    # spark-submit's PythonRunner merges the driver's stderr into its stdout.
    assert "--store / STATESTORE_STORE" in result.stdout
    assert "invalid store name" in result.stdout


def test_processing_time_trigger_runs_until_stopped(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    stream = StreamConfig(topic=topic, store=store_name, checkpoint=str(tmp_path / "cp"), trigger="1s")
    running = start(spark, JobConfig(stream, cassandra_config, kafka_config))
    query = running.query
    try:
        first, first_truth = generate(200, seed=41)
        produce_lines(kafka_config, topic, first)
        _wait_for(lambda: dump(session, keyspace, store_name) == dict(first_truth))
        assert query.isActive  # still running, waiting for more input
        second, second_truth = generate(200, seed=42)
        produce_lines(kafka_config, topic, second)
        _wait_for(lambda: dump(session, keyspace, store_name) == dict(first_truth + second_truth))
    finally:
        running.stop()
    assert not query.isActive


def _wait_for(condition, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(1)
    raise AssertionError(f"condition not met within {timeout_s}s")
