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


# The budget of one test (docs/development.md): a test longer than this on a quiet machine says
# in its docstring why it must be that long. The run's end lists every test over it, with that reason.
SLOW_TEST_S = 120.0
_slow_tests: list[tuple[float, str, str]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.duration > SLOW_TEST_S:
        reason = " ".join((getattr(item, "function", None).__doc__ or "").split())
        _slow_tests.append((report.duration, item.nodeid, reason))


def pytest_terminal_summary(terminalreporter):
    if _slow_tests:
        terminalreporter.section(f"tests over the {SLOW_TEST_S:.0f} s budget of one test (docs/development.md)")
        for duration, nodeid, reason in sorted(_slow_tests, reverse=True):
            terminalreporter.write_line(f"{duration:7.1f}s {nodeid}: {reason[:240] or 'NO DOCSTRING SAYING WHY'}")
