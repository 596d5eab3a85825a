"""The README documents every setting and every CLI command the code offers."""

import dataclasses
from pathlib import Path

import pytest

from statestore.cli.main import build_parser
from statestore.core.config import CassandraConfig, KafkaConfig, StreamConfig

README = (Path(__file__).resolve().parents[3] / "README.md").read_text()


@pytest.mark.parametrize(
    "setting",
    [f for cls in (CassandraConfig, KafkaConfig, StreamConfig) for f in dataclasses.fields(cls)],
    ids=lambda f: f.name,
)
def test_every_setting_is_documented_with_flag_and_variable(setting):
    assert f"`{setting.metadata['env']}`" in README
    assert f"`{setting.metadata['flag']}`" in README


def test_every_cli_command_is_documented():
    subcommands = build_parser()._subparsers._group_actions[0].choices
    for name in subcommands:
        assert f"`statestore {name}" in README, name
