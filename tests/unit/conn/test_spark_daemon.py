"""The library's Spark Python daemon: which zips it takes off the path, what it preloads, and
that it starts and answers as pyspark's own daemon does, from the installed pyspark."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import zipfile
from pathlib import Path

import pyspark
import pytest

from statestore.conn import spark
from statestore.conn.spark_daemon import EXECUTOR_IMPORTS, preload, without_bundled_zips

PROJECT = Path(__file__).resolve().parents[3]


def _package(root: Path, name: str, version: str = "1.0") -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    (root / name / "version.py").write_text(f"__version__ = {version!r}\n")
    return root


def _zip(path: Path, package: str, version: str = "1.0") -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "")
        archive.writestr(f"{package}/version.py", f"__version__ = {version!r}\n")
    return str(path)


@pytest.fixture
def installed(tmp_path):
    """A site directory with pyspark and py4j installed, and the zips pyspark ships inside it."""
    site = _package(_package(tmp_path / "site", "pyspark"), "py4j")
    lib = site / "pyspark" / "python" / "lib"
    return site, _zip(lib / "pyspark.zip", "pyspark"), _zip(lib / "py4j-0.10.9.9-src.zip", "py4j")


def test_the_zips_inside_the_installed_pyspark_leave_the_path(installed):
    site, pyspark_zip, py4j_zip = installed
    path = [pyspark_zip, py4j_zip, "/elsewhere", str(site)]
    assert without_bundled_zips(path) == ["/elsewhere", str(site)]


def test_the_zips_leave_when_reached_through_a_symbolic_link(installed, tmp_path):
    """Spark names the zips from SPARK_HOME, which pyspark resolves through links; the path to
    the installed package may still go through one."""
    site, pyspark_zip, py4j_zip = installed
    (tmp_path / "linked").symlink_to(site)
    assert without_bundled_zips([pyspark_zip, py4j_zip, str(tmp_path / "linked")]) == [str(tmp_path / "linked")]


def test_a_zip_of_another_release_stays(tmp_path):
    site = _package(_package(tmp_path / "site", "pyspark"), "py4j", version="0.10.9.7")
    lib = site / "pyspark" / "python" / "lib"
    pyspark_zip, py4j_zip = (
        _zip(lib / "pyspark.zip", "pyspark"),
        _zip(lib / "py4j-0.10.9.9-src.zip", "py4j", "0.10.9.9"),
    )
    assert without_bundled_zips([pyspark_zip, py4j_zip, str(site)]) == [py4j_zip, str(site)]


def test_a_zip_of_another_spark_distribution_stays(installed, tmp_path):
    site, _, _ = installed
    other = _zip(tmp_path / "opt" / "spark" / "python" / "lib" / "pyspark.zip", "pyspark")
    assert without_bundled_zips([other, str(site)]) == [other, str(site)]


def test_a_zip_whose_package_is_not_installed_beside_it_stays(tmp_path):
    site = _package(tmp_path / "site", "pyspark")  # pyspark installed, py4j not
    py4j_zip = _zip(site / "pyspark" / "python" / "lib" / "py4j-0.10.9.9-src.zip", "py4j")
    pyspark_zip = _zip(site / "pyspark" / "python" / "lib" / "pyspark.zip", "pyspark")
    assert without_bundled_zips([pyspark_zip, py4j_zip, str(site)]) == [py4j_zip, str(site)]


def test_without_an_installed_pyspark_the_path_is_unchanged(tmp_path):
    pyspark_zip = _zip(tmp_path / "spark" / "python" / "lib" / "pyspark.zip", "pyspark")
    assert without_bundled_zips([pyspark_zip, str(tmp_path)]) == [pyspark_zip, str(tmp_path)]


def test_preload_imports_and_names_what_it_could_not(monkeypatch, tmp_path):
    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('no event loop')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    failed = preload(("colorsys", "no_such_module_here", "raises_on_import"))
    assert "colorsys" in sys.modules
    assert [f.split(":")[0] for f in failed] == ["no_such_module_here", "raises_on_import"]
    assert "RuntimeError: no event loop" in failed[1]


def _spark_zips() -> list[str]:
    zips = sorted(str(z) for z in (Path(pyspark.__file__).parent / "python" / "lib").glob("*.zip"))
    assert zips, "pip's pyspark ships pyspark.zip and py4j's zip in python/lib"
    return zips


def test_the_daemon_starts_as_spark_starts_it():
    """`python -m <module> <worker module>` with pyspark's zips first on PYTHONPATH, as Spark's
    PythonWorkerFactory runs it: the daemon answers with its port on stdout and ends when its
    stdin closes."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(_spark_zips())}
    daemon = subprocess.Popen(
        [sys.executable, "-m", spark.DAEMON_MODULE, "pyspark.worker"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        ready, _, _ = select.select([daemon.stdout], [], [], 60)
        assert ready, "the daemon wrote no port within 60 s"
        port = int.from_bytes(daemon.stdout.read(4), "big")
        assert 0 < port < 65536
    finally:
        daemon.stdin.close()
        daemon.wait(timeout=30)
    assert b"not preloaded" not in daemon.stderr.read()


def test_spark_forks_its_python_workers_from_the_librarys_daemon(spark):
    """The session's workers have pyspark from the installed package and the executor imports
    done before their first task; with pyspark's own daemon they have neither."""

    def report(_):
        import sys

        yield (
            sys.modules["pyspark"].__file__,
            all(module in sys.modules for module in EXECUTOR_IMPORTS),
            [entry for entry in sys.path if entry.endswith(".zip")],
        )

    [(pyspark_file, preloaded, zips)] = spark.sparkContext.parallelize([0], 1).mapPartitions(report).collect()
    assert ".zip" not in pyspark_file
    assert preloaded
    assert not any(entry in zips for entry in _spark_zips())


def test_local_sessions_name_the_daemon_only_where_workers_would_find_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert spark._workers_import_the_library()
    # Another checkout in the working directory comes first on a worker's path (python -m).
    (tmp_path / "statestore" / "conn").mkdir(parents=True)
    for package in ("statestore", "statestore/conn"):
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "statestore" / "conn" / "spark_daemon.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert not spark._workers_import_the_library()
    monkeypatch.chdir(PROJECT)
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/some-other-python")
    assert not spark._workers_import_the_library()


def test_the_daemon_freezes_its_imports_out_of_the_collectors_reach_before_forking(monkeypatch):
    import gc

    from pyspark import daemon

    from statestore.conn import spark_daemon

    frozen_when_forking = []
    monkeypatch.setattr(spark_daemon, "preload", lambda: [])
    monkeypatch.setattr(daemon, "manager", lambda: frozen_when_forking.append(gc.get_freeze_count()))
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        spark_daemon.main()
    finally:
        gc.unfreeze()
    assert frozen_when_forking and frozen_when_forking[0] > 0
