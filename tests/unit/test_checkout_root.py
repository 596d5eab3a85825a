"""Modules that find the checkout they run from (the local stack's jars and JVM options, the
library archive for executors) point at the checkout's root, wherever the module sits in the
package: a module moved one folder deeper must not start looking inside statestore/."""

from __future__ import annotations

from pathlib import Path

import pytest

from statestore.conn import spark
from statestore.maintenance.shared import nodetool

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module", [spark, nodetool], ids=lambda m: m.__name__)
def test_the_project_root_is_the_checkout(module):
    assert module.PROJECT == ROOT
    assert (module.PROJECT / "stack" / "jvm17-server.options").is_file()
