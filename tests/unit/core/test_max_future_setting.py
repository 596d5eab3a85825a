"""--max-future / STATESTORE_MAX_FUTURE_MS: how far a record's event time may be ahead of its
batch's clock (issue 28, item 3). Pure: parsing only."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from statestore.core import config as cfg
from statestore.core.config import DEFAULT_MAX_FUTURE_MS, StreamConfig
from statestore.core.errors import ConfigError

BASE = ["--topic", "t", "--store", "s", "--checkpoint", "/tmp/cp"]


def _resolved(argv, env=None) -> int:
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, StreamConfig)
    return cfg.from_args(StreamConfig, parser.parse_args([*BASE, *argv]), env=env or {}).max_future_ms


def test_max_future_defaults_to_five_minutes_the_stream_s_own_default():
    assert _resolved([]) == 300_000
    default = {f.name: f.default for f in dataclasses.fields(StreamConfig)}["max_future_ms"]
    assert default == DEFAULT_MAX_FUTURE_MS


def test_max_future_is_a_duration_from_the_flag_or_the_environment():
    assert _resolved(["--max-future", "90s"]) == 90_000
    assert _resolved([], {"STATESTORE_MAX_FUTURE_MS": "1h"}) == 3_600_000
    assert _resolved(["--max-future", "2m"], {"STATESTORE_MAX_FUTURE_MS": "1h"}) == 120_000
    with pytest.raises(ConfigError, match="--max-future"):
        _resolved(["--max-future", "soon"])
    with pytest.raises(ConfigError, match="--max-future"):
        _resolved(["--max-future", "0s"])
