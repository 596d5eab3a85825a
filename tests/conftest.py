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


@pytest.fixture(scope="session")
def spark():
    from statestore.conn.spark import build_session

    session = build_session("statestore-tests", master="local[2]", conf={"spark.ui.enabled": "false"})
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()
