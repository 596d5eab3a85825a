"""Every Spark Kafka reader of the project starts from the same options: the bootstrap servers,
a short fetch.max.wait.ms (Kafka's 500 ms default made each task that read to the end of a
partition wait half a second: BENCHMARKS.md, "Kafka reads at the end of a partition") and
read_committed (records of aborted transactions are not input)."""

from __future__ import annotations

import argparse

import pytest

from statestore.conn.kafka import spark_source_options
from statestore.core import config as cfg
from statestore.core.config import KafkaConfig, StreamConfig
from statestore.core.errors import ConfigError
from statestore.stream import job
from tests.unit.conn.recording_reader import RecordingReader


def test_the_options_carry_the_servers_and_the_fetch_wait():
    kafka = cfg.resolve(KafkaConfig, env={"STATESTORE_KAFKA_BOOTSTRAP": "k1:9092,k2:9092"})
    assert spark_source_options(kafka) == {
        "kafka.bootstrap.servers": "k1:9092,k2:9092",
        "kafka.fetch.max.wait.ms": "10",
        "kafka.isolation.level": "read_committed",
    }


def test_the_isolation_level_follows_the_precedence_chain():
    env = {"STATESTORE_KAFKA_ISOLATION_LEVEL": "READ_UNCOMMITTED"}
    kafka = cfg.resolve(KafkaConfig, env=env)
    assert spark_source_options(kafka)["kafka.isolation.level"] == "read_uncommitted"
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, KafkaConfig)
    args = parser.parse_args(["--kafka-isolation-level", "read_committed"])
    assert cfg.from_args(KafkaConfig, args, env=env).isolation_level == "read_committed"
    assert cfg.to_environment(kafka)["STATESTORE_KAFKA_ISOLATION_LEVEL"] == "read_uncommitted"


def test_a_bad_isolation_level_names_the_flag_and_variable():
    with pytest.raises(ConfigError, match="--kafka-isolation-level / STATESTORE_KAFKA_ISOLATION_LEVEL"):
        cfg.resolve(KafkaConfig, env={"STATESTORE_KAFKA_ISOLATION_LEVEL": "committed"})


def test_the_fetch_wait_follows_the_precedence_chain():
    env = {"STATESTORE_KAFKA_FETCH_MAX_WAIT_MS": "0"}
    assert cfg.resolve(KafkaConfig, env=env).fetch_max_wait_ms == 0
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, KafkaConfig)
    args = parser.parse_args(["--kafka-fetch-max-wait-ms", "250"])
    assert cfg.from_args(KafkaConfig, args, env=env).fetch_max_wait_ms == 250


@pytest.mark.parametrize("raw", ["-1", "soon", "1.5"])
def test_a_bad_fetch_wait_names_the_flag_and_variable(raw):
    with pytest.raises(ConfigError, match="--kafka-fetch-max-wait-ms / STATESTORE_KAFKA_FETCH_MAX_WAIT_MS"):
        cfg.resolve(KafkaConfig, env={"STATESTORE_KAFKA_FETCH_MAX_WAIT_MS": raw})


def test_the_streaming_job_reads_with_them():
    class Spark:
        readStream = RecordingReader()

    stream = cfg.resolve(
        StreamConfig, env={"STATESTORE_TOPIC": "words", "STATESTORE_STORE": "s", "STATESTORE_CHECKPOINT": "/tmp/c"}
    )
    kafka = cfg.resolve(KafkaConfig, env={"STATESTORE_KAFKA_FETCH_MAX_WAIT_MS": "7"})
    config = job.JobConfig(stream, cfg.resolve(cfg.CassandraConfig, env={}), kafka)
    loaded = job._kafka_source(Spark(), config, "earliest")
    assert loaded["kafka.fetch.max.wait.ms"] == "7"
    assert loaded["kafka.isolation.level"] == "read_committed"
    assert loaded["kafka.bootstrap.servers"] == "127.0.0.1:9092"
    assert (loaded["subscribe"], loaded["startingOffsets"]) == ("words", "earliest")
