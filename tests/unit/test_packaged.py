"""Every package of the library is in the wheel: pyproject.toml lists its packages one by one,
and a package left out is only missed by the wheel's users (the checkout imports it anyway)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_of_statestore_is_listed_for_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "statestore").rglob("__init__.py")}
    assert packages - listed == set()
