"""The deployment's alert rules with Prometheus' own promtool (Debian's `prometheus` package,
installed by `make browser`): they parse, and each alert fires exactly on the series that
should raise it (deploy/prometheus/alerts_test.yml)."""

import shutil
import subprocess
from pathlib import Path

import pytest

PROMETHEUS = Path(__file__).resolve().parents[3] / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool is needed: `make browser` installs it")


def promtool(*args: str, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_alert_rules_parse():
    done = promtool("check", "rules", "alerts.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 4 rules found" in done.stdout


def test_each_alert_fires_on_its_series_and_only_there():
    done = promtool("test", "rules", "alerts_test.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_rule_is_caught(tmp_path):
    broken = (PROMETHEUS / "alerts.yml").read_text().replace("statestore_writer_up == 0", "statestore_writer_up ==")
    (tmp_path / "alerts.yml").write_text(broken)
    assert promtool("check", "rules", "alerts.yml", cwd=tmp_path).returncode != 0
