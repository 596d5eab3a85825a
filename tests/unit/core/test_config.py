import argparse
import dataclasses

import pytest

from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig, StreamConfig, parse_trigger, trigger_seconds
from statestore.core.errors import ConfigError, InvalidNameError


def test_defaults_point_at_the_local_stack():
    c = cfg.resolve(CassandraConfig, env={})
    assert (c.hosts, c.port, c.keyspace) == (("127.0.0.1",), 9042, "wordcount")
    assert cfg.resolve(KafkaConfig, env={}).bootstrap_servers == "127.0.0.1:9092"


def test_environment_overrides_defaults_and_flags_override_environment():
    env = {
        "STATESTORE_CASSANDRA_HOSTS": "h1, h2",
        "STATESTORE_CASSANDRA_PORT": "9142",
        "STATESTORE_KEYSPACE": "from_env",
    }
    c = cfg.resolve(CassandraConfig, env=env)
    assert (c.hosts, c.port, c.keyspace) == (("h1", "h2"), 9142, "from_env")
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, CassandraConfig)
    args = parser.parse_args(["--keyspace", "from_flag"])
    c = cfg.from_args(CassandraConfig, args, env=env)
    assert (c.hosts, c.keyspace) == (("h1", "h2"), "from_flag")


def test_config_is_frozen():
    c = cfg.resolve(CassandraConfig, env={})
    with pytest.raises(AttributeError):
        c.port = 1


def test_bad_values_name_the_flag_and_variable():
    with pytest.raises(ConfigError, match="--cassandra-port / STATESTORE_CASSANDRA_PORT"):
        cfg.resolve(CassandraConfig, env={"STATESTORE_CASSANDRA_PORT": "99999"})
    with pytest.raises(ConfigError, match="LOCAL_QUORUM"):
        cfg.resolve(CassandraConfig, env={"STATESTORE_DML_CONSISTENCY": "MOST"})
    with pytest.raises(ConfigError, match="keyspace"):
        cfg.resolve(CassandraConfig, env={"STATESTORE_KEYSPACE": "x; DROP"})


def test_password_never_shows_in_repr_or_errors():
    c = cfg.resolve(
        CassandraConfig, env={"STATESTORE_CASSANDRA_USERNAME": "u", "STATESTORE_CASSANDRA_PASSWORD": "s3cret"}
    )
    assert c.password == "s3cret"
    assert "s3cret" not in repr(c)


def test_stream_config_requires_topic_store_checkpoint():
    with pytest.raises(ConfigError, match="topic is required"):
        cfg.resolve(StreamConfig, env={})
    s = cfg.resolve(
        StreamConfig,
        env={"STATESTORE_TOPIC": "t", "STATESTORE_STORE": "s", "STATESTORE_CHECKPOINT": "/tmp/c"},
    )
    assert (s.trigger, s.starting_offsets, s.store_type, s.partitions) == (
        "available-now",
        "earliest",
        None,
        None,
    )


def test_stream_config_rejects_unsafe_store_name():
    with pytest.raises(ConfigError, match="invalid store name"):
        cfg.resolve(
            StreamConfig,
            env={"STATESTORE_TOPIC": "t", "STATESTORE_STORE": "s;drop", "STATESTORE_CHECKPOINT": "/c"},
        )
    with pytest.raises(InvalidNameError):
        StreamConfig(topic="t", store="Bad", checkpoint="/c")


@pytest.mark.parametrize(("raw", "seconds"), [("10s", 10.0), ("500ms", 0.5), ("2m", 120.0), ("1.5s", 1.5)])
def test_processing_time_triggers(raw, seconds):
    assert trigger_seconds(parse_trigger(raw)) == seconds


@pytest.mark.parametrize("raw", ["", "soon", "10", "-1s", "0s", "s"])
def test_bad_triggers(raw):
    with pytest.raises(ValueError, match="available-now"):
        parse_trigger(raw)


def test_a_switch_that_is_on_by_default_has_a_no_flag_and_the_environment_still_counts():
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, StreamConfig)
    base = ["--topic", "t", "--store", "s", "--checkpoint", "/tmp/cp"]
    assert cfg.from_args(StreamConfig, parser.parse_args(base), env={}).apply_cache is True
    off = parser.parse_args([*base, "--no-apply-cache"])
    assert cfg.from_args(StreamConfig, off, env={}).apply_cache is False
    env_off = {"STATESTORE_APPLY_CACHE": "false"}
    assert cfg.from_args(StreamConfig, parser.parse_args(base), env=env_off).apply_cache is False
    assert cfg.from_args(StreamConfig, parser.parse_args([*base, "--apply-cache"]), env=env_off).apply_cache is True


def test_the_driver_apply_limit_defaults_to_1000_records_and_refuses_a_negative_one():
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, StreamConfig)
    base = ["--topic", "t", "--store", "s", "--checkpoint", "/tmp/cp"]
    assert cfg.from_args(StreamConfig, parser.parse_args(base), env={}).driver_apply_records == 1000
    off = parser.parse_args([*base, "--driver-apply-records", "0"])
    assert cfg.from_args(StreamConfig, off, env={}).driver_apply_records == 0
    env = {"STATESTORE_DRIVER_APPLY_RECORDS": "250"}
    assert cfg.from_args(StreamConfig, parser.parse_args(base), env=env).driver_apply_records == 250
    with pytest.raises(ConfigError, match="--driver-apply-records / STATESTORE_DRIVER_APPLY_RECORDS: '-1'"):
        cfg.from_args(StreamConfig, parser.parse_args([*base, "--driver-apply-records", "-1"]), env={})


def test_two_sections_with_a_same_named_setting_are_refused_when_the_parser_is_built():
    @dataclasses.dataclass(frozen=True)
    class Other:
        """Another section."""

        hosts: str = cfg.setting("x", "STATESTORE_TEST_OTHER_HOSTS", "--other-hosts", "clashes with Cassandra's")

    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, CassandraConfig)
    with pytest.raises(TypeError, match=r"Other\.hosts collides"):
        cfg.add_arguments(parser, Other)


def test_compaction_of_a_new_store_is_a_setting_with_short_names():
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, StreamConfig)
    base = ["--topic", "t", "--store", "s", "--checkpoint", "/tmp/cp"]
    assert cfg.from_args(StreamConfig, parser.parse_args(base), env={}).compaction is None
    given = parser.parse_args([*base, "--compaction", "ucs"])
    assert cfg.from_args(StreamConfig, given, env={}).compaction == "UnifiedCompactionStrategy"
    env = {"STATESTORE_COMPACTION": "LeveledCompactionStrategy"}
    assert cfg.from_args(StreamConfig, parser.parse_args(base), env=env).compaction == "LeveledCompactionStrategy"
    with pytest.raises(ConfigError, match="--compaction / STATESTORE_COMPACTION: 'fast'"):
        cfg.from_args(StreamConfig, parser.parse_args([*base, "--compaction", "fast"]), env={})
    with pytest.raises(ConfigError, match="unknown compaction 'fast'"):
        StreamConfig(topic="t", store="s", checkpoint="/tmp/cp", compaction="fast")


def test_twcs_is_refused_for_a_key_value_store_and_taken_for_windows():
    with pytest.raises(ConfigError, match="--compaction twcs is for window and session stores"):
        StreamConfig(topic="t", store="s", checkpoint="/tmp/cp", compaction="twcs")
    windowed = StreamConfig(topic="t", store="s", checkpoint="/tmp/cp", compaction="twcs", window=60_000)
    assert windowed.compaction == "TimeWindowCompactionStrategy"
    sessions = StreamConfig(topic="t", store="s", checkpoint="/tmp/cp", compaction="twcs", session_gap=60_000)
    assert sessions.compaction == "TimeWindowCompactionStrategy"
