"""The provider's metadata, what Airflow's providers manager reads through the package's
`apache_airflow_provider` entry point (pyproject.toml): the connection type `statestore` with
its form fields and the hook (the plugin has its own entry point: see pyproject.toml). Plain data: importing this module
imports nothing of Airflow, and Airflow reads it without importing the hook."""

from __future__ import annotations

from typing import Any

import statestore

PACKAGE = "statestore"
HOOK = "statestore_airflow.hook.CassandraStateStoreHook"
CONN_TYPE = "statestore"  # = statestore_airflow.hook.CONN_TYPE (tests/unit/airflow/test_provider.py)

# The connection's extras (statestore_airflow.hook.EXTRA_FIELDS) as form fields: JSON schemas,
# as Airflow 3's connection form takes them.
_TEXT = {"type": ["string", "null"]}
_SWITCH = {"type": ["boolean", "null"], "default": False}
_CONSISTENCY = {
    "type": ["string", "null"],
    "enum": [None, "ONE", "LOCAL_ONE", "LOCAL_QUORUM", "QUORUM", "EACH_QUORUM", "ALL"],
}
CONN_FIELDS: dict[str, dict[str, Any]] = {
    "local_dc": {
        "label": "Local data center",
        "description": "the driver's local DC (multi-DC clusters)",
        "schema": _TEXT,
    },
    "ssl": {"label": "TLS", "description": "connect to Cassandra over TLS", "schema": _SWITCH},
    "ssl_ca": {
        "label": "TLS CA file",
        "description": "PEM file of the CA that signed the nodes' certificates",
        "schema": _TEXT,
    },
    "ssl_cert": {"label": "TLS client certificate", "description": "PEM file (client authentication)", "schema": _TEXT},
    "ssl_key": {"label": "TLS client key", "description": "PEM file of the client certificate's key", "schema": _TEXT},
    "check_hostname": {
        "label": "Check the node's host name",
        "description": "against its certificate",
        "schema": {"type": ["boolean", "null"], "default": True},
    },
    "dml_consistency": {
        "label": "Entry consistency",
        "description": "reads and writes of entries",
        "schema": _CONSISTENCY,
    },
    "allow_weak_consistency": {
        "label": "Allow ONE for entries",
        "description": "accept consistency ONE for entry reads and writes (read-modify-write may lose updates)",
        "schema": {"type": ["boolean", "null"], "default": False},
    },
    "ddl_consistency": {
        "label": "Schema consistency",
        "description": "creating and altering stores",
        "schema": _CONSISTENCY,
    },
    "bookkeeping_consistency": {
        "label": "Bookkeeping consistency",
        "description": "registry, leases, dead letters",
        "schema": _CONSISTENCY,
    },
    "serial_consistency": {
        "label": "Serial consistency",
        "description": "LOCAL_SERIAL or SERIAL (leases and epochs)",
        "schema": {"type": ["string", "null"], "enum": [None, "LOCAL_SERIAL", "SERIAL"]},
    },
    "request_timeout": {"label": "Request timeout (s)", "schema": {"type": ["number", "null"]}},
    "protocol_version": {"label": "CQL protocol version", "schema": {"type": ["integer", "null"]}},
}


KAFKA_HOOK = "statestore_airflow.kafka_hook.StateStoreKafkaHook"
KAFKA_CONN_TYPE = "statestore_kafka"  # = statestore_airflow.dag_support.KAFKA_CONN_TYPE
_PROTOCOLS = [None, "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
# The Kafka connection's extras (statestore_airflow.dag_support.KAFKA_EXTRA_FIELDS) as form fields.
KAFKA_CONN_FIELDS: dict[str, dict[str, Any]] = {
    "security_protocol": {"label": "Security protocol", "schema": {"type": ["string", "null"], "enum": _PROTOCOLS}},
    "sasl_mechanism": {
        "label": "SASL mechanism",
        "schema": {"type": ["string", "null"], "enum": [None, "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]},
    },
    "password_file": {
        "label": "SASL password file",
        "description": "a file on the workers holding the SASL password (instead of the password field)",
        "schema": _TEXT,
    },
    "ssl_ca": {"label": "TLS CA file", "description": "PEM file of the CA that signed the brokers", "schema": _TEXT},
    "ssl_cert": {"label": "TLS client certificate", "description": "PEM file (client authentication)", "schema": _TEXT},
    "ssl_key": {"label": "TLS client key", "description": "unencrypted PKCS#8 PEM file", "schema": _TEXT},
    "check_hostname": {
        "label": "Check the broker's host name",
        "schema": {"type": ["boolean", "null"], "default": True},
    },
}


def get_provider_info() -> dict[str, Any]:
    """The provider as Airflow's providers manager reads it (provider.yaml's fields)."""
    return {
        "package-name": PACKAGE,
        "name": "Cassandra state stores (statestore)",
        "description": "PySpark stream state in Apache Cassandra: hook, DAGs, store page",
        "versions": [statestore.__version__],
        "connection-types": [
            {
                "hook-class-name": HOOK,
                "hook-name": "Cassandra state stores (statestore)",
                "connection-type": CONN_TYPE,
                "ui-field-behaviour": {
                    "hidden-fields": ["extra"],
                    "relabeling": {"host": "Contact points", "schema": "Keyspace", "login": "User"},
                    "placeholders": {"host": "10.0.0.1,10.0.0.2", "port": "9042", "schema": "wordcount"},
                },
                "conn-fields": CONN_FIELDS,
            },
            {
                "hook-class-name": KAFKA_HOOK,
                "hook-name": "Kafka for state stores (statestore)",
                "connection-type": KAFKA_CONN_TYPE,
                "ui-field-behaviour": {
                    "hidden-fields": ["extra", "schema", "port"],
                    "relabeling": {"host": "Bootstrap servers", "login": "SASL user", "password": "SASL password"},
                    "placeholders": {"host": "broker1:9092,broker2:9092"},
                },
                "conn-fields": KAFKA_CONN_FIELDS,
            },
        ],
    }
