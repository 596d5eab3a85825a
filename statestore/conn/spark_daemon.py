"""Spark's Python worker daemon, started from bytecode with the executors' imports done.

Spark starts its daemon (`python -m <spark.python.daemon.module> <worker module>`) once per
executor and forks every Python worker from it. conn.spark names this module for local masters,
whose workers run the driver's own interpreter, where the library is installed. Before running
pyspark's own daemon it:

- drops from the path the copies of pyspark and py4j that Spark put first on it, zips inside the
  installed pyspark package, when the same packages are installed beside them. Python caches no
  bytecode for a zip, so the daemon compiled pyspark at every start: 0.5 s of its 0.7 s, the
  largest part of a cold restart's Python start (BENCHMARKS.md, "The Python daemon");
- imports what every worker's first task would import again (the Cassandra driver, numpy,
  pyarrow, the library's Cassandra connection), so forked workers inherit them. Only imports:
  nothing here starts a thread or opens a connection before the fork;
- spares the workers' tasks the re-reads of zip archives (conn.spark.spare_zip_rereads).
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder

# What the forked workers would each import in their first task, in import order.
EXECUTOR_IMPORTS = ("numpy", "pyarrow", "cassandra.cluster", "statestore.conn.cassandra")


def _zipped_package(entry: str) -> str | None:
    """The package a zip Spark puts on the Python path holds: pyspark.zip, py4j-<version>-src.zip."""
    name = os.path.basename(entry)
    if not name.endswith(".zip"):
        return None
    return name.removesuffix(".zip").split("-")[0] or None


def without_bundled_zips(path: list[str]) -> list[str]:
    """`path` without the zips of pyspark and py4j shipped inside the installed pyspark package
    whose packages are installed outside them too (so they are the same release: pip installs
    py4j at the version that pyspark pins). A zip of another Spark distribution stays."""
    unzipped = [entry for entry in path if _zipped_package(entry) is None]
    spec = PathFinder.find_spec("pyspark", unzipped)
    if spec is None or spec.origin is None:
        return list(path)
    installed = os.path.dirname(spec.origin) + os.sep

    def bundled(entry: str) -> bool:
        package = _zipped_package(entry)
        return (
            package is not None
            and os.path.abspath(entry).startswith(installed)
            and PathFinder.find_spec(package, unzipped) is not None
        )

    return [entry for entry in path if not bundled(entry)]


def preload(modules: tuple[str, ...] = EXECUTOR_IMPORTS) -> list[str]:
    """Import `modules`; the ones that failed, each with why. A module that cannot be imported
    here fails in the task that needs it, where Spark reports it with the task's error."""
    import importlib

    failed = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            failed.append(f"{module}: {error}")
    return failed


def main() -> None:
    sys.path[:] = without_bundled_zips(sys.path)
    for failure in preload():
        print(f"statestore daemon: not preloaded, {failure}", file=sys.stderr)
    from statestore.conn.spark import spare_zip_rereads

    spare_zip_rereads()
    # pyspark.daemon reads the worker module from sys.argv[1], which Spark passed on to us.
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
