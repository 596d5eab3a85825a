"""docker-compose.yaml and docker/Dockerfile, checked without a Docker engine: the file parses,
every engine is there with a pinned image, and ports, versions and connections agree with the
code's defaults and the local stack."""

from __future__ import annotations

import json
import re
import sys
from importlib.metadata import version
from pathlib import Path

import tests.airflow_env  # noqa: F401 - sets Airflow's test home before Airflow is imported

# isort: split
import pytest
import yaml
from airflow.sdk import Connection
from statestore_airflow import dag_support, provider
from statestore_airflow.hook import connection_config

from statestore.core.config import CassandraConfig, KafkaConfig

PROJECT = Path(__file__).resolve().parents[3]
AIRFLOW_SERVICES = {"airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((PROJECT / "docker-compose.yaml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def dockerfile() -> str:
    return (PROJECT / "docker" / "Dockerfile").read_text()


def _pom_version(name: str) -> str:
    return re.search(rf"<{name}.version>([^<]+)<", (PROJECT / "stack" / "pom.xml").read_text()).group(1)


def _host_ports(service: dict) -> dict[int, int]:
    """container port -> host port ("[HOST_IP:]HOST:CONTAINER")."""
    return {int(p.split(":")[-1]): int(p.split(":")[-2]) for p in service.get("ports", [])}


def _connections(services) -> dict[str, dict]:
    script = "\n".join(services["airflow-init"]["command"])
    found = re.findall(r"airflow connections add (\w+) --conn-json \\?\s*'(.*?)'", script, re.DOTALL)
    return {conn_id: json.loads(body) for conn_id, body in found}


def _connection(fields: dict) -> Connection:
    return Connection(conn_id="from_compose", **{**fields, "extra": json.dumps(fields.get("extra", {}))})


def test_every_engine_is_a_service(services):
    assert set(services) == {
        "postgres",
        "cassandra",
        "cassandra-init",
        "kafka",
        "spark-master",
        "spark-worker",
        "airflow-init",
        "statestore-api",
        "prometheus",
        *AIRFLOW_SERVICES,
    }
    assert "zookeeper" not in services  # Kafka runs in KRaft mode
    kafka = services["kafka"]["environment"]
    assert set(kafka["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}


def test_every_image_is_pinned(services, dockerfile):
    assert services["cassandra-init"]["image"] == services["cassandra"]["image"]  # its cqlsh matches the server
    for name, service in services.items():
        image = service["image"]
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest" and re.search(r"\d", tag), f"{name}: {image} is not pinned"
    bases = re.findall(r"^FROM\s+(\S+)", dockerfile, re.MULTILINE)
    assert bases == [f"apache/airflow:{version('apache-airflow')}-python3.11"]
    assert f"python{sys.version_info.major}.{sys.version_info.minor}" in bases[0]


def test_engine_versions_match_the_local_stack(services):
    assert services["cassandra"]["image"] == f"cassandra:{_pom_version('cassandra')}"
    assert _pom_version("cassandra").startswith("5.0.")
    assert services["kafka"]["image"] == f"apache/kafka:{_pom_version('kafka')}"
    # Spark in the image is the pinned pyspark wheel, the version the Kafka connector is built for.
    requirements = (PROJECT / "requirements.txt").read_text()
    assert f"pyspark=={_pom_version('spark')}" in requirements and version("pyspark") == _pom_version("spark")
    assert dag_support.kafka_connector_package().endswith(f":{_pom_version('spark')}")


def test_host_ports_are_the_codes_defaults(services):
    assert _host_ports(services["cassandra"]) == {CassandraConfig().port: CassandraConfig().port}
    kafka_port = int(KafkaConfig().bootstrap_servers.rsplit(":", 1)[1])
    assert _host_ports(services["kafka"]) == {kafka_port: kafka_port}
    assert f"HOST://localhost:{kafka_port}" in services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert _host_ports(services["airflow-apiserver"]) == {8080: 8080}
    assert 8080 not in _host_ports(services["spark-master"]).values()  # Spark's UI does not clash with Airflow's


def test_health_checks_gate_the_start(services):
    for name in ("postgres", "cassandra", "kafka", "spark-master", "statestore-api", "prometheus", *AIRFLOW_SERVICES):
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no health check"
    for name in AIRFLOW_SERVICES | {"airflow-init"}:
        depends = services[name]["depends_on"]
        for engine in ("postgres", "cassandra", "kafka"):
            assert depends[engine] == {"condition": "service_healthy"}, f"{name} starts before {engine} is healthy"
    for name in AIRFLOW_SERVICES:
        assert services[name]["depends_on"]["airflow-init"] == {"condition": "service_completed_successfully"}
    assert services["airflow-scheduler"]["depends_on"]["spark-master"] == {"condition": "service_healthy"}
    # Cassandra's roles exist before anything logs in with them.
    assert services["cassandra-init"]["depends_on"]["cassandra"] == {"condition": "service_healthy"}
    for name in ("airflow-init", "statestore-api"):
        assert services[name]["depends_on"]["cassandra-init"] == {"condition": "service_completed_successfully"}


def test_init_creates_the_connections_the_dags_use(services):
    connections = _connections(services)
    assert set(connections) == {dag_support.CASSANDRA_CONN_ID, dag_support.KAFKA_CONN_ID, dag_support.SPARK_CONN_ID}
    cassandra = connection_config(_connection(connections[dag_support.CASSANDRA_CONN_ID]))
    assert (cassandra.hosts, cassandra.port, cassandra.keyspace) == (("cassandra",), 9042, CassandraConfig().keyspace)
    kafka = _connection(connections[dag_support.KAFKA_CONN_ID])
    assert dag_support.kafka_bootstrap(kafka) == "kafka:29092"
    # Of the provider's own types, as docs/airflow.md tells users to create them (issue 46).
    assert connections[dag_support.CASSANDRA_CONN_ID]["conn_type"] == provider.CONN_TYPE
    assert connections[dag_support.KAFKA_CONN_ID]["conn_type"] == provider.KAFKA_CONN_TYPE
    assert "INTERNAL://kafka:29092" in services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    spark = connections[dag_support.SPARK_CONN_ID]
    assert spark["host"] == "spark://spark-master:7077" and spark["extra"]["spark-binary"] == "spark-submit"
    assert "7077" in services["spark-master"]["command"]
    script = "\n".join(services["airflow-init"]["command"])
    assert f"create-keyspace {CassandraConfig().keyspace}" in script
    assert "create-topic sample-lines" in script  # the wordcount_stream DAG's default topic


def test_airflow_runs_this_projects_dags_and_plugins(compose, services, dockerfile):
    common = compose["x-airflow-common"]
    env = common["environment"]
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/statestore/dags"
    assert env["AIRFLOW__CORE__PLUGINS_FOLDER"] == "/opt/statestore/plugins"
    for mount in common["volumes"]:
        source = mount.split(":")[0]
        if source.startswith("./"):
            assert (PROJECT / source).is_dir(), f"{source} is mounted but missing"
    assert "COPY --chown=airflow:0 jobs ./jobs" in dockerfile and "pip install" in dockerfile
    # Driver (scheduler) and executors (Spark workers) run one image: one Python, one library.
    assert services["spark-worker"]["image"] == services["airflow-scheduler"]["image"] == common["image"]
    assert services["airflow-scheduler"]["hostname"] == "airflow-scheduler"


def test_spark_services_run_spark_class_not_airflow(services, dockerfile):
    # The image's entrypoint is Airflow's: without an entrypoint of their own, `spark-class ...`
    # would become `airflow spark-class ...` and the master and worker would never start.
    for name in ("spark-master", "spark-worker"):
        assert services[name]["entrypoint"] == ["/usr/bin/dumb-init", "--"], name
        assert services[name]["command"][0] == "spark-class", name
    assert services["spark-master"]["command"][1] == "org.apache.spark.deploy.master.Master"
    assert services["spark-worker"]["command"][1] == "org.apache.spark.deploy.worker.Worker"


def test_kafka_takes_the_producers_largest_message(services):
    from statestore.conn.kafka import MAX_MESSAGE_BYTES

    env = services["kafka"]["environment"]
    assert int(env["KAFKA_MESSAGE_MAX_BYTES"]) >= MAX_MESSAGE_BYTES + 4096
    assert int(env["KAFKA_REPLICA_FETCH_MAX_BYTES"]) >= int(env["KAFKA_MESSAGE_MAX_BYTES"])


def test_the_image_ships_the_kafka_connector_the_local_stack_uses(dockerfile):
    # The same Maven profile as scripts/install-jvm, into the folder STATESTORE_SPARK_JARS names,
    # so the DAGs submit with --jars (--packages cannot resolve the 4.1.x token provider).
    assert "-P spark-kafka" in dockerfile and "-f /tmp/stack/pom.xml" in dockerfile
    assert "-DoutputDirectory=/opt/statestore/jars" in dockerfile
    assert re.search(r"STATESTORE_SPARK_JARS=/opt/statestore/jars\b", dockerfile)
    assert '-P "$runtime"' in (PROJECT / "scripts" / "install-jvm").read_text()
