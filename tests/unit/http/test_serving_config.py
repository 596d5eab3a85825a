"""The serve settings: one precedence chain (defaults < STATESTORE_HTTP_* < flags), and the
hand-over to worker processes through the environment gives back exactly the same settings."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError
from statestore.http.serving import ServeConfig


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, ServeConfig)
    cfg.add_arguments(parser, CassandraConfig)
    return parser.parse_args(argv)


def test_flags_beat_the_environment_which_beats_the_defaults():
    env = {"STATESTORE_HTTP_WORKERS": "3", "STATESTORE_HTTP_MAX_QUEUE": "5"}
    serve = cfg.from_args(ServeConfig, _parse("--workers", "2", "--port", "9000"), env)
    assert (serve.workers, serve.http_port, serve.max_queue, serve.max_active) == (2, 9000, 5, 32)
    assert cfg.resolve(ServeConfig, env={}) == ServeConfig()


@pytest.mark.parametrize(
    "flag, value, named",
    [("--workers", "0", "--workers"), ("--max-queue", "-1", "--max-queue"), ("--port", "70000", "--port")],
)
def test_bad_values_name_their_flag(flag, value, named):
    with pytest.raises(ConfigError, match=named):
        cfg.from_args(ServeConfig, _parse(flag, value), {})


def test_a_worker_resolves_from_the_environment_what_the_parent_resolved():
    args = _parse(
        "--workers", "4", "--cache-entries", "500", "--cache-ttl", "2.5", "--max-active", "8", "--max-queue", "0",
        "--cassandra-hosts", "127.0.0.2,127.0.0.3", "--cassandra-ssl", "--keyspace", "ks_x",
    )  # fmt: skip
    serve = cfg.from_args(ServeConfig, args, {})
    cassandra = cfg.from_args(CassandraConfig, args, {"STATESTORE_CASSANDRA_PASSWORD": "s3cret"})
    env = {**cfg.to_environment(serve), **cfg.to_environment(cassandra)}
    assert cfg.resolve(ServeConfig, env=env) == serve
    again = cfg.resolve(CassandraConfig, env=env)
    assert again == cassandra
    assert again.password == "s3cret" and again.hosts == ("127.0.0.2", "127.0.0.3") and again.ssl is True
    # None fields are left out, so a worker falls back to the same default as its parent.
    assert all(value != "None" for value in env.values())
    assert dataclasses.replace(serve, workers=1) != cfg.resolve(ServeConfig, env=env)
