"""The error a job stops with once Cassandra stays short of replicas: it names the consistency
levels, the nodes the driver sees down, and what Cassandra said it lacked (even when the last
attempt was only a client timeout)."""

from __future__ import annotations

import time

import pytest
from cassandra import ConsistencyLevel, OperationTimedOut, Unavailable

from statestore.conn.retry import with_retries
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import CassandraUnavailableError


def test_the_error_names_levels_and_the_replicas_cassandra_lacked():
    config = cfg.resolve(CassandraConfig, env={"STATESTORE_RETRY_BUDGET": "0.01"})
    attempts = []

    def action():
        attempts.append(1)
        if len(attempts) == 1:
            raise Unavailable("x", consistency=ConsistencyLevel.LOCAL_QUORUM, required_replicas=2, alive_replicas=1)
        raise OperationTimedOut("client timeout")

    with pytest.raises(CassandraUnavailableError) as caught:
        with_retries(config, "applying batch 7", action, sleep=lambda _s: time.sleep(0.02))
    assert len(attempts) >= 2
    message = str(caught.value)
    assert "applying batch 7" in message
    assert "entries need LOCAL_QUORUM" in message and "serial LOCAL_SERIAL" in message
    assert "consistency LOCAL_QUORUM needs 2 replicas but only 1 are alive" in message
    assert "last error: OperationTimedOut" in message


def test_a_plain_outage_names_no_replica_shortfall():
    config = cfg.resolve(CassandraConfig, env={"STATESTORE_RETRY_BUDGET": "0.01"})

    def action():
        raise OperationTimedOut("client timeout")

    with pytest.raises(CassandraUnavailableError) as caught:
        with_retries(config, "reading", action, sleep=lambda _s: time.sleep(0.02))
    assert "needs" not in str(caught.value).split("last error")[0].replace("entries need", "")


def test_min_insync_above_the_replication_is_refused_before_any_topic_is_made():
    from statestore.core.config import KafkaConfig
    from statestore.core.errors import ConfigError

    env = {"STATESTORE_KAFKA_TOPIC_REPLICATION": "1", "STATESTORE_KAFKA_MIN_INSYNC_REPLICAS": "2"}
    with pytest.raises(ConfigError, match="exceeds --topic-replication 1"):
        cfg.resolve(KafkaConfig, env=env)
    assert cfg.resolve(KafkaConfig, env={}).topic_replication == 1
