"""The provider's metadata (statestore_airflow.provider) as Airflow reads it: valid against
Airflow's own schema, one connection type whose form fields are exactly the extras the hook
reads, and the entry points that make Airflow find it (pyproject.toml)."""

from __future__ import annotations

import tests.airflow_env  # noqa: F401  (Airflow's settings before Airflow is imported)

# isort: split
import json
import tomllib
from importlib.resources import files
from pathlib import Path

import jsonschema
from airflow.models import Connection
from statestore_airflow import hook, provider

PROJECT = Path(__file__).resolve().parents[3]


def test_the_metadata_is_valid_for_airflow_and_names_the_hook_and_its_fields():
    info = provider.get_provider_info()
    jsonschema.validate(info, json.loads(files("airflow").joinpath("provider_info.schema.json").read_text()))
    (connection,) = (c for c in info["connection-types"] if c["connection-type"] == "statestore")
    assert connection["connection-type"] == hook.CassandraStateStoreHook.conn_type == provider.CONN_TYPE
    module, _, name = connection["hook-class-name"].rpartition(".")
    assert (module, name) == (hook.__name__, hook.CassandraStateStoreHook.__name__)
    # Every form field is an extra the hook reads: a field it did not know would make it refuse
    # the connection the form saved.
    assert set(connection["conn-fields"]) == set(hook.EXTRA_FIELDS)


def test_a_connection_saved_by_the_form_is_read_like_plain_extras():
    extra = {"extra__statestore__local_dc": "dc2", "extra__statestore__ssl": False, "dml_consistency": "QUORUM"}
    conn = Connection(conn_id="form", conn_type="statestore", host="10.0.0.1", extra=json.dumps(extra))
    config = hook.connection_config(conn)
    assert (config.local_dc, config.ssl, config.dml_consistency) == ("dc2", False, "QUORUM")


def test_the_entry_points_name_the_provider_and_the_plugin():
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["apache_airflow_provider"] == {
        "provider_info": "statestore_airflow.provider:get_provider_info"
    }
    assert project["entry-points"]["airflow.plugins"] == {"statestore": "statestore_airflow.plugin:StateStorePlugin"}


def test_the_kafka_connection_type_offers_exactly_the_extras_its_settings_read():
    from statestore_airflow import dag_support, kafka_hook

    kafka = next(
        c for c in provider.get_provider_info()["connection-types"] if c["connection-type"] == "statestore_kafka"
    )
    assert kafka["hook-class-name"] == f"{kafka_hook.__name__}.{kafka_hook.StateStoreKafkaHook.__name__}"
    assert kafka_hook.StateStoreKafkaHook.conn_type == dag_support.KAFKA_CONN_TYPE == provider.KAFKA_CONN_TYPE
    assert set(kafka["conn-fields"]) == set(dag_support.KAFKA_EXTRA_FIELDS)
    form = {
        "extra__statestore_kafka__security_protocol": "SASL_SSL",
        "extra__statestore_kafka__sasl_mechanism": "SCRAM-SHA-512",
    }
    conn = Connection(
        conn_id="k", conn_type="statestore_kafka", host="b1:9093", login="u", password="p", extra=json.dumps(form)
    )
    config = dag_support.kafka_config(conn)
    assert (config.security_protocol, config.sasl_mechanism, config.sasl_username) == ("SASL_SSL", "SCRAM-SHA-512", "u")


def test_the_store_page_reads_kafka_through_the_kafka_connection_type(monkeypatch):
    from statestore_airflow import plugin

    monkeypatch.delenv("AIRFLOW_CONN_STATESTORE_KAFKA", raising=False)
    assert plugin._kafka_config() is None  # no connection: the page shows no lag
    extra = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512"}
    connection = {"conn_type": "statestore_kafka", "host": "b1:9093,b2", "login": "u", "password": "p", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_STATESTORE_KAFKA", json.dumps(connection))
    config = plugin._kafka_config()
    assert (config.bootstrap_servers, config.security_protocol, config.sasl_username, config.sasl_password) == (
        "b1:9093,b2:9092",
        "SASL_SSL",
        "u",
        "p",
    )
