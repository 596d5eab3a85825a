"""spare_zip_rereads: after it, importlib.invalidate_caches() reads a zip archive again only
when the file changed, and once for all of its importers; imports from the archive still see
a changed archive. Run in a child Python so the patch stays out of the test process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

from statestore.conn.spark import PROJECT

_CHILD = textwrap.dedent(
    """
    import importlib, json, sys, zipimport
    archive, spare = sys.argv[1], sys.argv[2] == "spare"
    sys.path.insert(0, archive)
    import pkg.inner.mod  # importers for the archive, pkg and pkg/inner
    reads = []
    original = zipimport._read_directory
    zipimport._read_directory = lambda path: (reads.append(path), original(path))[1]
    if spare:
        from statestore.conn.spark import spare_zip_rereads
        spare_zip_rereads()
        spare_zip_rereads()  # a second call changes nothing
    importers = sum(isinstance(f, zipimport.zipimporter) for f in sys.path_importer_cache.values())
    importlib.invalidate_caches()
    importlib.invalidate_caches()
    unchanged = len(reads)
    print(json.dumps({"importers": importers, "unchanged": unchanged}), flush=True)
    sys.stdin.readline()  # the parent changes the archive meanwhile
    importlib.invalidate_caches()
    import pkg.inner.added
    print(json.dumps({"changed": len(reads) - unchanged, "added": pkg.inner.added.VALUE}), flush=True)
    """
)


def _archive(path: Path, extra: dict[str, str]) -> None:
    files = {"pkg/__init__.py": "", "pkg/inner/__init__.py": "", "pkg/inner/mod.py": "VALUE = 1\n", **extra}
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)


def _run(tmp_path: Path, mode: str) -> tuple[dict, dict]:
    import json

    archive = tmp_path / f"{mode}.zip"
    _archive(archive, {})
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(archive), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT,
    )
    first = json.loads(child.stdout.readline())
    _archive(archive, {"pkg/inner/added.py": "VALUE = 'new module, longer archive'\n"})
    out, _ = child.communicate("go\n", timeout=60)
    assert child.returncode == 0
    return first, json.loads(out)


def test_an_unchanged_archive_is_not_read_again(tmp_path):
    first, second = _run(tmp_path, "spare")
    assert first["importers"] >= 3
    assert first["unchanged"] == 1  # the first call reads it once for all importers, the second not at all
    assert second == {"changed": 1, "added": "new module, longer archive"}  # one read for all importers


def test_without_it_every_importer_reads_the_archive_on_every_call(tmp_path):
    first, second = _run(tmp_path, "plain")
    assert first["unchanged"] == 2 * first["importers"]  # what the patch spares
    assert second["added"] == "new module, longer archive"
