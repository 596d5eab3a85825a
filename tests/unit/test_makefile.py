"""The Makefile's own interface: a bare `make` (and `make help`) lists every target with one
line and installs nothing; `make maintenance` hands the expiry a retention (30d unless RETENTION
says otherwise). Runs the real make; nothing but `make help` is executed (`-n` elsewhere)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
MAKEFILE = PROJECT / "Makefile"
# Phony targets left out of the help on purpose: none today, every one is a user's to run.
INTERNAL: frozenset[str] = frozenset()
# What installing or starting anything would run.
SIDE_EFFECTS = ("pip install", "install-jvm", "scripts/stack", "apt-get", "pytest", "spark-submit", "jobs/")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def make(*args: str) -> subprocess.CompletedProcess:
    # No make of the caller's (`make test-unit STORE=x` hands its variables down in MAKEFLAGS).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "RETENTION", "STORE")}
    return subprocess.run(
        ["make", "--no-print-directory", *args], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=60
    )


def phony_targets() -> set[str]:
    text = MAKEFILE.read_text().replace("\\\n", " ")
    return {t for line in re.findall(r"^\.PHONY:(.*)$", text, re.M) for t in line.split()}


def rule_targets() -> set[str]:
    """Every target a rule names, but files ($(VENV)/.installed) and special targets."""
    found = set()
    for line in MAKEFILE.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.$()/ -]+?):(?![=:])", line)
        if match and not line.startswith(("\t", ".")):
            found |= {t for t in match.group(1).split() if re.fullmatch(r"[a-z][a-z0-9-]*", t)}
    return found


def listed(output: str) -> dict[str, str]:
    lines = [line for line in output.splitlines() if line.startswith("  ")]
    targets = [line.split(None, 1) for line in lines]
    assert all(len(t) == 2 and t[1].strip() for t in targets), f"a target without its line: {lines}"
    names = [t[0] for t in targets]
    assert len(names) == len(set(names)), f"a target listed twice: {names}"
    return dict(targets)


def test_help_lists_every_phony_target_with_one_line():
    began = time.monotonic()
    done = make("help")
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - began < 10
    assert done.stdout.startswith("usage: make TARGET")
    assert set(listed(done.stdout)) == phony_targets() - INTERNAL
    for name, text in listed(done.stdout).items():
        assert len(f"  {name:<18} {text}") <= 110, f"{name}: keep its help to one short line"


def test_every_target_is_phony():
    """A target missing from .PHONY would be skipped whenever a file of its name appears,
    and this test would not see it in the help."""
    assert rule_targets() - phony_targets() == set()
    assert phony_targets() - rule_targets() == set(), "a .PHONY name with no rule"


def test_a_bare_make_prints_the_help_and_installs_nothing():
    dry = make("-n")  # what a bare make would run, without running it
    assert dry.returncode == 0, dry.stderr
    assert not [s for s in SIDE_EFFECTS if s in dry.stdout], dry.stdout
    began = time.monotonic()
    bare = make()
    assert bare.returncode == 0, bare.stderr
    assert time.monotonic() - began < 10
    assert bare.stdout == make("help").stdout and "maintenance" in listed(bare.stdout)


def expire_line(*variables: str) -> str:
    # -n: the recipe as make would run it; install's steps are printed, not run.
    done = make("-n", "maintenance", "STORE=words", *variables)
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if "jobs/expire_state.py" in line]
    return line


def test_maintenance_expires_key_value_stores_at_30_days_unless_told():
    assert "--store words --retention 30d --report-dir" in expire_line()
    assert "--store words --retention 30d --report-dir" in expire_line("RETENTION=")
    assert "--retention 7d --report-dir" in expire_line("RETENTION=7d")
