"""docker-compose.yaml checked by a real validator against the compose-spec JSON schema
(check-jsonschema's vendored copy of compose-spec.json; no Docker engine here). A mutated copy
proves the check can fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[3]
VALIDATOR = [str(Path(sys.executable).parent / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec"]


def _validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*VALIDATOR, str(path)], capture_output=True, text=True, timeout=120)


def test_the_compose_file_follows_the_compose_spec():
    result = _validate(PROJECT / "docker-compose.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "validation done" in result.stdout


def test_a_misspelt_service_key_is_rejected(tmp_path):
    compose = yaml.safe_load((PROJECT / "docker-compose.yaml").read_text())
    compose["services"]["cassandra"]["entrypiont"] = ["cassandra", "-f"]
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text(yaml.safe_dump(compose))
    result = _validate(broken)
    assert result.returncode == 1
    assert "entrypiont" in result.stdout + result.stderr
