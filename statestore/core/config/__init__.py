"""The configuration sections: how to reach Cassandra (CassandraConfig) and Kafka (KafkaConfig),
and what a stream job runs (StreamConfig); one module each, beside this face.

Each is a frozen dataclass of settings resolved on one chain (statestore.core.settings: defaults <
STATESTORE_* environment < flags). The resolving functions are re-exported here, so callers keep
one import: `from statestore.core import config as cfg; cfg.resolve(CassandraConfig)`.
"""

from __future__ import annotations

from statestore.core.config.cassandra import CONSISTENCY_LEVELS, WEAK_DML_CONSISTENCY_LEVELS, CassandraConfig
from statestore.core.config.kafka import KAFKA_SASL_MECHANISMS, KAFKA_SECURITY_PROTOCOLS, KafkaConfig
from statestore.core.config.password_file import read_password_file
from statestore.core.config.stream import DEFAULT_MAX_FUTURE_MS, StreamConfig
from statestore.core.durations import parse_trigger, trigger_seconds
from statestore.core.settings import add_arguments, from_args, resolve, setting, to_environment

__all__ = [
    "CONSISTENCY_LEVELS",
    "DEFAULT_MAX_FUTURE_MS",
    "KAFKA_SASL_MECHANISMS",
    "KAFKA_SECURITY_PROTOCOLS",
    "WEAK_DML_CONSISTENCY_LEVELS",
    "CassandraConfig",
    "KafkaConfig",
    "StreamConfig",
    "add_arguments",
    "from_args",
    "parse_trigger",
    "read_password_file",
    "resolve",
    "setting",
    "to_environment",
    "trigger_seconds",
]
