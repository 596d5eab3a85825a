"""docs/compatibility.md states the versions the tests run on (constraints.txt, stack/pom.xml)
and the ranges pyproject.toml declares: a pin or a range that moves without the page fails."""

from __future__ import annotations

import re
import tomllib

from tests.unit.docs.manual import DOCS, ROOT

PAGE = DOCS / "compatibility.md"


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 3 and not set(cells[0]) <= {"-"}:
            rows[cells[0]] = cells[1:]
    return rows


def _pins() -> dict[str, str]:
    text = (ROOT / "constraints.txt").read_text()
    return {m[1].lower().replace("_", "-"): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)}


def _pom(name: str) -> str:
    return re.search(rf"<{name}>([^<]+)</{name}>", (ROOT / "stack" / "pom.xml").read_text())[1]


def _declared() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    every = project["dependencies"] + [d for deps in project["optional-dependencies"].values() for d in deps]
    return {re.split(r"[<>=\[]", d, maxsplit=1)[0]: d for d in every}


def test_the_tested_versions_are_the_pinned_ones():
    rows, pins = _rows(), _pins()
    for component, package in [
        ("Apache Airflow", "apache-airflow"),
        ("Airflow's Spark provider", "apache-airflow-providers-apache-spark"),
        ("Apache Spark (pyspark)", "pyspark"),
        ("cassandra-driver", "cassandra-driver"),
        ("confluent-kafka", "confluent-kafka"),
        ("Great Expectations (maintenance)", "great-expectations"),
    ]:
        assert rows[component][0].split()[0].rstrip(":") == pins[package], component
    assert rows["Apache Cassandra"][0].startswith(_pom("cassandra.version") + ":")
    assert rows["Apache Kafka"][0].startswith(_pom("kafka.version") + " ")
    assert f"spark-sql-kafka-0-10_2.13 {_pom('spark.version')} " in rows["Spark's Kafka source"][0]
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert re.search(r"^FROM apache/airflow:(\S+)", dockerfile, re.M)[1] in PAGE.read_text()


def test_the_declared_ranges_are_pyprojects():
    rows, declared = _rows(), _declared()
    for component, package in [
        ("Apache Airflow", "apache-airflow"),
        ("Airflow's Spark provider", "apache-airflow-providers-apache-spark"),
        ("Apache Spark (pyspark)", "pyspark"),
        ("cassandra-driver", "cassandra-driver"),
        ("confluent-kafka", "confluent-kafka"),
        ("Great Expectations (maintenance)", "great-expectations"),
    ]:
        assert f"`{declared[package]}`" in rows[component][1], component
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11" and rows["Python"][1].startswith("3.11 and later")
    minors = [c.rsplit(" ", 1)[1] for c in project["classifiers"] if re.fullmatch(r".*Python :: 3\.\d+", c)]
    assert f"classifiers {', '.join(minors)}" in rows["Python"][1]
