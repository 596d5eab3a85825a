"""Spark's Python worker daemon, started from bytecode with the executors' imports done.

Spark starts its daemon (`python -m <spark.python.daemon.module> <worker module>`) once per
executor and forks every Python worker from it. conn.spark names this module for local masters,
whose workers run the driver's own interpreter, where the library is installed. Before running
pyspark's own daemon it:

- drops from the path the copies of pyspark and py4j that Spark put first on it, zips inside the
  installed pyspark package, when the same releases are installed beside them. Python caches no
  bytecode for a zip, so the daemon compiled pyspark at every start, the largest part of a cold
  restart's Python start;
- imports what every worker's first task would import again (the Cassandra driver, numpy,
  pyarrow, the library's Cassandra connection), so forked workers inherit them. Imports only:
  no connection, no open file. pyarrow's allocator starts a background thread, which stays in
  the daemon (a forked worker has only its own thread); numpy and pyarrow register fork
  handlers, and Spark limits numpy's thread pool through OMP_NUM_THREADS;
- spares the workers' tasks the re-reads of zip archives (conn.spark.spare_zip_rereads);
- freezes what it holds out of the garbage collector's reach (gc.freeze), so the full
  collection a worker runs after each task walks only what the worker made since its fork.
"""

from __future__ import annotations

import gc
import os
import sys
import zipfile
from importlib.machinery import PathFinder

# What the forked workers would each import in their first task, in import order.
EXECUTOR_IMPORTS = ("numpy", "pyarrow", "cassandra.cluster", "statestore.conn.cassandra")


def _zipped_package(entry: str) -> str | None:
    """The package a zip Spark puts on the Python path holds: pyspark.zip, py4j-<version>-src.zip."""
    name = os.path.basename(entry)
    if not name.endswith(".zip"):
        return None
    return name.removesuffix(".zip").split("-")[0] or None


def _version_file(location: str, package: str) -> bytes | None:
    """`package`/version.py under `location`, a zip or a directory; None where there is none."""
    try:
        if location.endswith(".zip"):
            with zipfile.ZipFile(location) as archive:
                return archive.read(f"{package}/version.py")
        with open(os.path.join(location, package, "version.py"), "rb") as source:
            return source.read()
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def without_bundled_zips(path: list[str]) -> list[str]:
    """`path` without the zips of pyspark and py4j shipped inside the installed pyspark package,
    where the same release of their package is installed beside them (the same version.py:
    pyspark admits a range of py4j releases, and pyspark-client installs into pyspark's folder).
    A zip of another Spark distribution stays, as does any zip whose release differs."""
    unzipped = [entry for entry in path if _zipped_package(entry) is None]
    spec = PathFinder.find_spec("pyspark", unzipped)
    if spec is None or spec.origin is None:
        return list(path)
    # Spark names the zips from SPARK_HOME, which pyspark resolves through symbolic links.
    installed = os.path.dirname(os.path.realpath(spec.origin)) + os.sep

    def bundled(entry: str) -> bool:
        package = _zipped_package(entry)
        if package is None or not os.path.realpath(entry).startswith(installed):
            return False
        beside = PathFinder.find_spec(package, unzipped)
        if beside is None or beside.origin is None:
            return False
        version = _version_file(entry, package)
        return version is not None and version == _version_file(
            os.path.dirname(os.path.dirname(beside.origin)), package
        )

    return [entry for entry in path if not bundled(entry)]


def preload(modules: tuple[str, ...] = EXECUTOR_IMPORTS) -> list[str]:
    """Import `modules`; the ones that failed, each with why."""
    import importlib

    failed = []
    for module in modules:
        try:
            importlib.import_module(module)
        # Any failure, not only ImportError (cassandra-driver raises DependencyException without
        # an event loop; a binary mismatch raises others): a daemon that died here would fail
        # every Python task, where pyspark's own daemon fails only the tasks that import it.
        except Exception as error:  # noqa: BLE001
            failed.append(f"{module}: {type(error).__name__}: {error}")
    return failed


def main() -> None:
    kept = without_bundled_zips(sys.path)
    for dropped in set(sys.path) - set(kept):
        sys.path_importer_cache.pop(dropped, None)  # else each task's invalidate_caches visits it
    sys.path[:] = kept
    for failure in preload():
        print(f"statestore daemon: not preloaded, {failure}", file=sys.stderr)
    from statestore.conn.spark import spare_zip_rereads

    spare_zip_rereads()
    # pyspark.daemon reads the worker module from sys.argv[1], which Spark passed on to us.
    from pyspark import daemon

    # Everything imported so far lives as long as the daemon and its workers. A forked worker
    # runs a full collection after every task (pyspark.daemon), which would walk all of it;
    # frozen, it is out of the collector's reach.
    gc.freeze()
    daemon.manager()


if __name__ == "__main__":
    main()
