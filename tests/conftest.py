"""Fixtures shared by every tier. The SparkSession is one per test run (Spark allows one
per process), built with the Kafka connector so unit and integration tests can share it."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# HYPOTHESIS_PROFILE=ci (set by .ci/run) selects Hypothesis' own "ci" profile: the same examples
# every run, so a CI failure reproduces; local runs keep exploring new examples.
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])

# The JVMs the tests start through spark-submit (their jobs, the in-process SparkSession, the
# DAGs' submissions) live for seconds to minutes: compiling with C1 alone and collecting with
# the serial collector halves what they cost (a two-batch job here: 72 CPU-s with the JVM's
# defaults, 36 with these), leaving the two cores to Cassandra, Kafka and the other test lane.
# Nothing the tests assert depends on it; benchmarks never run under it. A SPARK_SUBMIT_OPTS
# already set wins.
TEST_SPARK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config):
    os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_SPARK_JVM_OPTIONS)


@pytest.fixture(scope="session")
def spark():
    from statestore.conn.spark import build_session

    session = build_session("statestore-tests", master="local[2]", conf={"spark.ui.enabled": "false"})
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()
