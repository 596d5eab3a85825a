"""StateStoreKafkaHook: the provider's `statestore_kafka` connection type, the Kafka the stream
reads and the CLI's producer writes: host the bootstrap servers, login / password the SASL
user, extras the TLS and SASL settings (statestore_airflow.dag_support.KAFKA_EXTRA_FIELDS).
Only an adapter: the connection becomes a statestore.core.config.KafkaConfig, checked as the
library's own settings are."""

from __future__ import annotations

from airflow.sdk import BaseHook

from statestore.core.config import KafkaConfig
from statestore_airflow import dag_support


class StateStoreKafkaHook(BaseHook):
    """The Kafka settings of a `statestore_kafka` connection (default `statestore_kafka`).

    :param kafka_conn_id: the connection
    """

    conn_name_attr = "kafka_conn_id"
    default_conn_name = dag_support.KAFKA_CONN_ID
    conn_type = dag_support.KAFKA_CONN_TYPE
    hook_name = "Kafka for state stores (statestore)"

    def __init__(self, kafka_conn_id: str = default_conn_name, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id

    def get_conn(self) -> KafkaConfig:
        """The connection's KafkaConfig (read when called, never at DAG-parse time)."""
        return dag_support.kafka_config(self.get_connection(self.kafka_conn_id))
