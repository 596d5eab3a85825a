"""The statestore Airflow plugin: the store page and the read-only query API in the API server,
linked from the UI's Browse menu (an external view rendered in the UI's frame). Registered
through the package's `airflow.plugins` entry point (pyproject.toml), so an Airflow that has
the package installed loads it with no file in its plugins folder."""

from __future__ import annotations

from typing import ClassVar

from airflow.plugins_manager import AirflowPlugin

from statestore_airflow import dag_support
from statestore_airflow.store_page import create_store_app


def _cassandra_config():
    """The `statestore_cassandra` connection's settings, looked up on the first request."""
    from statestore_airflow.hook import CassandraStateStoreHook

    return CassandraStateStoreHook(dag_support.CASSANDRA_CONN_ID).config


def _kafka_config():
    """The `statestore_kafka` connection's settings (servers, TLS, SASL), for lag (None when it
    is not defined)."""
    from airflow.sdk.exceptions import AirflowNotFoundException

    from statestore_airflow.kafka_hook import StateStoreKafkaHook

    try:
        return StateStoreKafkaHook(dag_support.KAFKA_CONN_ID).get_conn()
    except AirflowNotFoundException:
        return None


class StateStorePlugin(AirflowPlugin):
    """The store page and the read-only query API in Airflow's API server, behind its login,
    reading the stores through the `statestore_cassandra` connection (lag through
    `statestore_kafka`) and the reports in `STATESTORE_REPORT_DIR`."""

    name = "statestore"
    fastapi_apps: ClassVar[list] = [
        {
            "app": create_store_app(_cassandra_config, dag_support.report_dir, kafka=_kafka_config),
            "url_prefix": "/statestore",
            "name": "State stores (page and read-only query API)",
        }
    ]
    external_views: ClassVar[list] = [
        {
            "name": "State stores",
            # No leading slash: the UI resolves it against its base URL.
            "href": "statestore/",
            "url_route": "statestore",
            "destination": "nav",
            "category": "browse",
        }
    ]
