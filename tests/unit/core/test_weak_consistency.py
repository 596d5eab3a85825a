"""Entry reads and writes need consistency levels whose read and write replicas overlap: the
replay-safe apply reads a key's current row and writes old + delta, batch after batch, so a read
that misses the last write (ONE after a write at ONE on another replica) loses that update for
good, without an error. Such levels are refused unless forced."""

from __future__ import annotations

import argparse

import pytest

from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError

WEAK = ["ONE", "LOCAL_ONE", "TWO", "THREE"]


@pytest.mark.parametrize("level", WEAK)
def test_a_weak_level_from_the_environment_is_refused_saying_why(level):
    with pytest.raises(ConfigError) as refused:
        cfg.resolve(CassandraConfig, env={"STATESTORE_DML_CONSISTENCY": level.lower()})
    message = str(refused.value)
    assert f"--dml-consistency {level}" in message and "STATESTORE_DML_CONSISTENCY" in message
    assert "lose updates" in message
    assert "--allow-weak-consistency" in message and "STATESTORE_ALLOW_WEAK_CONSISTENCY" in message


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, CassandraConfig)
    return parser


def test_a_weak_level_from_a_flag_or_the_constructor_is_refused():
    with pytest.raises(ConfigError, match="--dml-consistency ONE"):
        cfg.from_args(CassandraConfig, _parser().parse_args(["--dml-consistency", "one"]), env={})
    with pytest.raises(ConfigError, match="--dml-consistency LOCAL_ONE"):
        CassandraConfig(dml_consistency="LOCAL_ONE")


@pytest.mark.parametrize("level", WEAK)
def test_the_switch_forces_a_weak_level(level):
    env = {"STATESTORE_DML_CONSISTENCY": level, "STATESTORE_ALLOW_WEAK_CONSISTENCY": "true"}
    assert cfg.resolve(CassandraConfig, env=env).dml_consistency == level
    args = _parser().parse_args(["--dml-consistency", level, "--allow-weak-consistency"])
    forced = cfg.from_args(CassandraConfig, args, env={})
    assert (forced.dml_consistency, forced.allow_weak_consistency) == (level, True)
    # Handed on to the processes a job starts, the forced level still resolves.
    assert cfg.resolve(CassandraConfig, env=cfg.to_environment(forced)) == forced


@pytest.mark.parametrize("level", ["LOCAL_QUORUM", "QUORUM", "EACH_QUORUM", "ALL"])
def test_overlapping_levels_need_no_switch(level):
    assert cfg.resolve(CassandraConfig, env={"STATESTORE_DML_CONSISTENCY": level}).dml_consistency == level
    assert cfg.resolve(CassandraConfig, env={}).allow_weak_consistency is False
