"""The job as users run it: through spark-submit, and with a processing-time trigger."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from statestore.core.config import StreamConfig
from statestore.stream.job import JobConfig, start
from tests.corpus import generate
from tests.integration.conftest import dump, produce_lines, spark_submit_job, wait_for

PROJECT = Path(__file__).resolve().parents[3]


def _spark_submit(*job_args: str) -> subprocess.CompletedProcess:
    job = spark_submit_job(*job_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = job.communicate(timeout=600)
    return subprocess.CompletedProcess(job.args, job.returncode, stdout, stderr)


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


def test_spark_submit_settings_win_over_the_jobs_defaults(tmp_path):
    # The job's defaults (4 shuffle partitions, ...) fill in only what spark-submit left unset:
    # a rescaled job must get the shuffle partitions its operator asks for.
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from statestore.conn.spark import build_session\n"
        "conf = build_session('probe').conf\n"
        "print('partitions', conf.get('spark.sql.shuffle.partitions'))\n"
        "print('progress', conf.get('spark.ui.showConsoleProgress'))\n"
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    submit = ["spark-submit", "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=8", str(probe)]
    result = subprocess.run(submit, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "partitions 8" in result.stdout and "progress false" in result.stdout


def test_processing_time_trigger_runs_until_stopped(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    stream = StreamConfig(topic=topic, store=store_name, checkpoint=str(tmp_path / "cp"), trigger="1s")
    running = start(spark, JobConfig(stream, cassandra_config, kafka_config))
    query = running.query
    try:
        first, first_truth = generate(200, seed=41)
        produce_lines(kafka_config, topic, first)
        wait_for(lambda: dump(session, keyspace, store_name) == dict(first_truth))
        assert query.isActive  # still running, waiting for more input
        second, second_truth = generate(200, seed=42)
        produce_lines(kafka_config, topic, second)
        wait_for(lambda: dump(session, keyspace, store_name) == dict(first_truth + second_truth))
    finally:
        running.stop()
    assert not query.isActive
