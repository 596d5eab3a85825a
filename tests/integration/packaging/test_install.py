"""The package as a user installs it, with no checkout on the path: the wheel built from this
repository, installed into fresh virtualenvs.

- With its version ranges on the newest Python here, next to other patch versions of pandas
  and numpy than the pinned ones: every public module of the library imports, the CLI runs.
- With Airflow (the tested constraints) in a temporary AIRFLOW_HOME whose DAGs folder is the
  installed package's example DAGs: Airflow lists the provider and its connection type, the
  admin DAG and the stream DAG (spark-submit of the installed job, available-now, on the local
  stack) succeed, and the store page, loaded from the package's entry point, answers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.corpus import generate
from tests.integration.conftest import dump, free_port, produce_lines

PROJECT = Path(__file__).resolve().parents[3]
# Other patch versions than constraints.txt pins: the ranges, not the pins, decide.
OTHER_PATCHES = ["pandas==3.1.0", "numpy==2.4.5"]


def _run(argv, *, cwd: Path, env: dict[str, str] | None = None, timeout: int = 900) -> str:
    began = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    print(f"{time.monotonic() - began:6.1f} s  {' '.join(map(str, argv))[:160]}")
    assert done.returncode == 0, (
        f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    return done.stdout


def _newest_python() -> str:
    """The newest CPython 3.x here: on PATH, or installed by pyenv (whose shims refuse a version
    that is not selected)."""
    found: dict[tuple[int, int], str] = {}
    for minor in range(11, 20):
        candidates = [shutil.which(f"python3.{minor}")]
        candidates += sorted(map(str, Path.home().glob(f".pyenv/versions/3.{minor}.*/bin/python3.{minor}")))
        for candidate in filter(None, candidates):
            if subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
                found[(3, minor)] = candidate
    return found[max(found)] if found else sys.executable


# What the wheel is built from (pyproject.toml), copied: a build in the checkout would leave
# package metadata there, which Airflow would find as a second installed copy.
SOURCES = ["pyproject.toml", "README.md", "statestore", "jobs", "dags", "plugins/statestore_airflow"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in SOURCES:
        copy = shutil.copytree if (PROJECT / name).is_dir() else shutil.copy
        copy(
            PROJECT / name,
            source / name,
            **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}),
        )
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)], cwd=out)
    (built,) = out.glob("statestore-*.whl")
    return built


def _venv(python: str, where: Path) -> Path:
    _run([python, "-m", "venv", str(where)], cwd=where.parent)
    return where / "bin"


def _clean_env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any path into the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "AIRFLOW", "STATESTORE_"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return {**env, **extra}


PUBLIC_MODULES = """
import importlib, pkgutil, sys, statestore
names = [m.name for m in pkgutil.walk_packages(statestore.__path__, "statestore.")]
# statestore.jobs are spark-submit scripts and __main__ the CLI, not modules to import; the reports and
# the validation need the `maintenance` extra.
skipped = ("statestore.jobs", "statestore.__main__", "statestore.maintenance.validate.quality",
           "statestore.maintenance.shared.reports", "statestore.maintenance.validate.idempotency")
imported = [n for n in names if not n.startswith(skipped) and importlib.import_module(n)]
assert all(not m.__file__.startswith(sys.argv[1]) for m in map(sys.modules.get, imported) if m and m.__file__)
print(len(imported))
"""


def test_the_wheel_installs_with_its_ranges_on_the_newest_python(wheel, tmp_path):
    python = _newest_python()
    bin_dir = _venv(python, tmp_path / "venv")
    env = _clean_env(bin_dir)
    _run([bin_dir / "pip", "install", "-q", str(wheel), *OTHER_PATCHES], cwd=tmp_path, env=env)
    versions = _run(
        [bin_dir / "python", "-c", "import pandas, numpy, sys; print(pandas.__version__, numpy.__version__)"],
        cwd=tmp_path,
        env=env,
    )
    assert versions.split() == [p.split("==")[1] for p in OTHER_PATCHES]
    imported = int(_run([bin_dir / "python", "-c", PUBLIC_MODULES, str(PROJECT)], cwd=tmp_path, env=env))
    assert imported > 60
    assert _run([bin_dir / "statestore", "--version"], cwd=tmp_path, env=env).strip() == "statestore 0.1.0"


def _http(url: str, token: str | None = None, body: dict | None = None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def test_the_provider_installs_into_a_clean_airflow(
    wheel, tmp_path, session, cassandra_config, kafka_config, keyspace, topic, store_name
):
    bin_dir = _venv(sys.executable, tmp_path / "venv")
    constraints = PROJECT / "constraints.txt"
    _run(
        [bin_dir / "pip", "install", "-q", f"{wheel}[airflow]", "-c", str(constraints)],
        cwd=tmp_path,
        env=_clean_env(bin_dir),
    )
    example_dags = _run(
        [bin_dir / "python", "-c", "import statestore_airflow.example_dags as d; print(d.__path__[0])"],
        cwd=tmp_path,
        env=_clean_env(bin_dir),
    ).strip()
    assert example_dags.startswith(str(tmp_path / "venv")), example_dags
    home = tmp_path / "airflow"
    home.mkdir()
    (home / "passwords.json").write_text(json.dumps({"admin": "install-test"}))
    # The Kafka connector as the user's Spark has it: a copy, so nothing under the checkout is used.
    jars = shutil.copytree(PROJECT / ".stack" / "lib" / "spark-kafka", tmp_path / "spark-jars")
    env = _clean_env(
        bin_dir,
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=example_dags,
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(home / "passwords.json"),
        AIRFLOW_CONN_STATESTORE_CASSANDRA=json.dumps(
            {"conn_type": "statestore", "host": "127.0.0.1", "port": cassandra_config.port, "schema": keyspace}
        ),
        AIRFLOW_CONN_STATESTORE_KAFKA=json.dumps(
            {"conn_type": "statestore_kafka", "host": kafka_config.bootstrap_servers}
        ),
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps(
            {"conn_type": "spark", "host": "local[2]", "extra": {"spark-binary": "spark-submit"}}
        ),
        STATESTORE_SPARK_JARS=str(jars),  # the local stack's connector (else Maven Central by --packages)
    )
    airflow = str(bin_dir / "airflow")
    _run([airflow, "db", "migrate"], cwd=tmp_path, env=env)

    providers = _run([airflow, "providers", "list", "--output", "json"], cwd=tmp_path, env=env)
    assert {"package_name": "statestore", "version": "0.1.0"}.items() <= {
        k: v for p in json.loads(providers) if p["package_name"] == "statestore" for k, v in p.items()
    }.items(), providers
    hooks = _run([airflow, "providers", "hooks", "--output", "json"], cwd=tmp_path, env=env)
    assert {"statestore", "statestore_kafka"} <= {h["connection_type"] for h in json.loads(hooks)}, hooks
    plugins = _run([airflow, "plugins", "--output", "json"], cwd=tmp_path, env=env)
    assert any(p["name"] == "statestore" for p in json.loads(plugins)), plugins

    # The admin DAG, from the installed package's DAGs.
    created = {"action": "create", "store": store_name, "partitions": 2}
    _run([airflow, "dags", "test", "state_store_admin", "-c", json.dumps(created)], cwd=tmp_path, env=env)
    # The stream DAG: spark-submit of the job file shipped in the package, available-now.
    lines, truth = generate(300, seed=29)
    produce_lines(kafka_config, topic, lines)
    conf = {"topic": topic, "store": store_name, "trigger": "available-now"}
    out = _run([airflow, "dags", "test", "wordcount_stream", "-c", json.dumps(conf)], cwd=tmp_path, env=env)
    assert dump(session, keyspace, store_name) == dict(truth)
    (job,) = (tmp_path / "venv").glob("lib/python3*/site-packages/statestore/jobs/wordcount_stream.py")
    assert str(job) in out, out[-5000:]  # spark-submit ran the job file of the installed package

    # The store page: the API server of the clean venv loads the plugin from the entry point.
    port = free_port()
    server_log = (home / "api-server.log").open("w")
    server = subprocess.Popen(
        [airflow, "api-server", "--port", str(port)],
        cwd=tmp_path,
        env={**env, "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}"},
        stdout=server_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while _http(f"{base}/api/v2/monitor/health")[0] != 200:
            assert server.poll() is None, (home / "api-server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the API server did not answer within 180 s"
            time.sleep(1)
        status, body = _http(f"{base}/auth/token", body={"username": "admin", "password": "install-test"})
        assert status in (200, 201), body
        token = json.loads(body)["access_token"]
        assert _http(f"{base}/statestore/")[0] in (401, 403)  # not without a login
        status, page = _http(f"{base}/statestore/", token)
        for _ in range(100):  # the list shows a page of stores: follow its "next" links to this one
            assert status == 200, page
            following = re.search(r'id="next" href="\?page=(\d+)"', page)
            if store_name in page or following is None:
                break
            status, page = _http(f"{base}/statestore/?page={following.group(1)}", token)
        assert store_name in page
        word, count = next(iter(dict(truth).items()))
        status, answer = _http(f"{base}/statestore/api/stores/{store_name}/keys/{word}", token)
        assert status == 200 and json.loads(answer)["value"] == count, answer
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
        server_log.close()
