"""docs/provider-reference.md is what statestore_airflow.reference generates from the code, and
it names every connection type, extra, hook method, operator and plugin the provider has, and
every param of the example DAGs' trigger forms."""

from __future__ import annotations

import importlib
import inspect

import tests.airflow_env as airflow_env

# isort: split
from statestore_airflow import provider, reference
from statestore_airflow.hook import CassandraStateStoreHook
from statestore_airflow.kafka_hook import StateStoreKafkaHook
from statestore_airflow.operators import MaintenanceJobOperator

PAGE = airflow_env.PROJECT / "docs" / "provider-reference.md"


def test_docs_provider_reference_is_what_the_code_generates():
    assert PAGE.read_text(encoding="utf-8") == reference.markdown(), (
        "regenerate: python -m statestore_airflow.reference > docs/provider-reference.md"
    )


def test_the_reference_names_every_connection_type_extra_hook_method_operator_and_param():
    page = reference.markdown()
    for connection in provider.get_provider_info()["connection-types"]:
        assert f"### `{connection['connection-type']}`" in page
        assert f"Hook `{connection['hook-class-name']}`" in page
        for extra in connection["conn-fields"]:
            assert f"| `{extra}` |" in page
    for cls in (CassandraStateStoreHook, StateStoreKafkaHook, MaintenanceJobOperator):
        assert f"### {cls.__name__}\n" in page
    for cls in (CassandraStateStoreHook, StateStoreKafkaHook):
        for name, _ in reference._members(cls):
            assert f"- `{name}" in page
    for module in ("wordcount_stream", "state_store_admin", "state_maintenance", "own_aggregation"):
        dag = importlib.import_module(f"statestore_airflow.example_dags.{module}").dag
        section = page.split(f"### {dag.dag_id}\n", 1)[1].split("\n### ", 1)[0]
        assert [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")] == list(dag.params)


def test_every_public_member_says_what_it_does():
    """The reference shows each member's docstring: a member without one would be a bare name."""
    undocumented = [
        f"{cls.__name__}.{name}"
        for cls in (CassandraStateStoreHook, StateStoreKafkaHook, MaintenanceJobOperator)
        for name, member in reference._members(cls)
        if not inspect.getdoc(member.fget if isinstance(member, property) else member)
    ]
    assert undocumented == []
