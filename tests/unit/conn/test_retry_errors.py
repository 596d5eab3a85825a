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
    assert "entries need QUORUM, registry and lease QUORUM (serial SERIAL)" in message
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


def _cas_unknown():
    from cassandra.protocol import ErrorMessage

    return ErrorMessage(0x1700, "CAS operation result is unknown - proposal accepted by 1 but not a quorum.", None)


def test_an_lwt_with_an_unknown_outcome_is_retried_like_a_timeout():
    # Protocol v5's CAS_WRITE_UNKNOWN reaches us as the driver's bare ErrorMessage (code 0x1700).
    config = cfg.resolve(CassandraConfig, env={"STATESTORE_RETRY_BUDGET": "5"})
    attempts = []

    def action():
        attempts.append(1)
        if len(attempts) < 3:
            raise _cas_unknown()
        return "taken"

    assert with_retries(config, "taking the lease", action, sleep=lambda _s: None) == "taken"
    assert len(attempts) == 3


def test_other_server_errors_are_not_retried():
    from cassandra import InvalidRequest
    from cassandra.protocol import ErrorMessage

    config = cfg.resolve(CassandraConfig, env={"STATESTORE_RETRY_BUDGET": "5"})
    for error in (InvalidRequest("no such table"), ErrorMessage(0x2000, "syntax error", None)):
        attempts = []

        def action(error=error, attempts=attempts):
            attempts.append(1)
            raise error

        with pytest.raises(type(error)):
            with_retries(config, "reading", action, sleep=lambda _s: None)
        assert len(attempts) == 1


class _Statement:
    def bind(self, params):
        from types import SimpleNamespace

        return SimpleNamespace(params=params, consistency_level=None)


class _Session:
    """A session whose serial reads fail with `errors` first, then answer."""

    def __init__(self, errors):
        from types import SimpleNamespace

        from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile

        self.errors = list(errors)
        self.calls = []
        profiles = {EXEC_PROFILE_DEFAULT: ExecutionProfile(serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL)}
        self.cluster = SimpleNamespace(profile_manager=SimpleNamespace(profiles=profiles))

    def execute(self, bound, execution_profile):
        self.calls.append(bound.consistency_level)
        if self.errors:
            raise self.errors.pop(0)
        return "row"


def test_a_serial_read_left_unknown_by_contention_reads_again():
    from cassandra import WriteTimeout, WriteType

    from statestore.conn.cassandra import serial_read

    cas_timeout = WriteTimeout("timeout", consistency=ConsistencyLevel.LOCAL_SERIAL, write_type=WriteType.CAS)
    session = _Session([_cas_unknown(), cas_timeout])
    assert serial_read(session, _Statement(), ("store",)) == "row"
    assert session.calls == [ConsistencyLevel.LOCAL_SERIAL] * 3


def test_a_serial_read_gives_up_after_a_few_rounds_and_never_retries_other_errors():
    from cassandra import InvalidRequest

    from statestore.conn.cassandra import serial_read

    session = _Session([_cas_unknown() for _ in range(10)])
    with pytest.raises(Exception, match="CAS operation result is unknown"):
        serial_read(session, _Statement(), ("store",))
    assert len(session.calls) == 4
    session = _Session([InvalidRequest("no such table")])
    with pytest.raises(InvalidRequest):
        serial_read(session, _Statement(), ("store",))
    assert len(session.calls) == 1


def test_a_table_gone_under_the_writer_is_fencing_not_an_outage():
    """A reset or re-layout moved the store to a new table: the writer stops at once, fenced."""
    from cassandra import InvalidRequest

    from statestore.core.errors import StoreFencedError

    config = cfg.resolve(CassandraConfig, env={"STATESTORE_RETRY_BUDGET": "5"})
    for said in ("table ks.words_store does not exist", "unconfigured table words_store"):
        attempts = []

        def action(said=said, attempts=attempts):
            attempts.append(1)
            raise InvalidRequest(f'Error from server: code=2200 [Invalid query] message="{said}"')

        with pytest.raises(StoreFencedError, match="applying batch 3 failed: its table is gone") as caught:
            with_retries(config, "applying batch 3", action, sleep=lambda _s: None)
        assert attempts == [1] and said in str(caught.value)


def test_another_invalid_request_is_not_taken_for_fencing():
    from cassandra import InvalidRequest

    config = cfg.resolve(CassandraConfig, env={"STATESTORE_RETRY_BUDGET": "5"})

    def action():
        raise InvalidRequest("Key may not be empty")

    with pytest.raises(InvalidRequest, match="Key may not be empty"):
        with_retries(config, "applying batch 3", action, sleep=lambda _s: None)
