"""The Cassandra password from a file (--cassandra-password-file / STATESTORE_CASSANDRA_PASSWORD_FILE)
or from the environment, and the warning a password on the command line earns."""

from __future__ import annotations

import argparse
import re

import pytest

from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, CassandraConfig)
    return parser


def test_the_password_is_the_files_content_without_its_trailing_newline(tmp_path):
    secret = tmp_path / "cassandra-password"
    secret.write_text("s3cret pass\n")
    by_env = cfg.resolve(CassandraConfig, env={"STATESTORE_CASSANDRA_PASSWORD_FILE": str(secret)})
    assert by_env.password == "s3cret pass"
    by_flag = cfg.from_args(CassandraConfig, _parser().parse_args(["--cassandra-password-file", str(secret)]), env={})
    assert by_flag == by_env
    assert "s3cret" not in repr(by_flag)
    secret.write_text("crlf\r\n")
    assert cfg.resolve(CassandraConfig, env={"STATESTORE_CASSANDRA_PASSWORD_FILE": str(secret)}).password == "crlf"


def test_a_config_read_from_a_file_hands_children_the_password_not_the_file(tmp_path):
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    config = cfg.resolve(CassandraConfig, env={"STATESTORE_CASSANDRA_PASSWORD_FILE": str(secret)})
    env = cfg.to_environment(config)
    assert env["STATESTORE_CASSANDRA_PASSWORD"] == "from-file"
    assert "STATESTORE_CASSANDRA_PASSWORD_FILE" not in env
    secret.unlink()  # read once: the child does not need the file
    assert cfg.resolve(CassandraConfig, env=env) == config


def test_the_environment_password_still_works_and_an_empty_file_setting_means_none():
    env = {"STATESTORE_CASSANDRA_PASSWORD": "from-env"}
    assert cfg.resolve(CassandraConfig, env=env).password == "from-env"
    # What the DAGs set beside the connection's password: a worker's own file setting does not clash.
    env["STATESTORE_CASSANDRA_PASSWORD_FILE"] = ""
    assert cfg.resolve(CassandraConfig, env=env).password == "from-env"


@pytest.mark.parametrize(
    ("env", "argv"),
    [
        ({"STATESTORE_CASSANDRA_PASSWORD": "pw-given", "STATESTORE_CASSANDRA_PASSWORD_FILE": "{file}"}, []),
        ({"STATESTORE_CASSANDRA_PASSWORD": "pw-given"}, ["--cassandra-password-file", "{file}"]),
        ({"STATESTORE_CASSANDRA_PASSWORD_FILE": "{file}"}, ["--cassandra-password", "pw-given"]),
    ],
    ids=["both-in-env", "env-password-and-file-flag", "file-env-and-password-flag"],
)
def test_a_password_and_a_file_together_are_refused(tmp_path, env, argv):
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    env = {k: v.format(file=secret) for k, v in env.items()}
    args = _parser().parse_args([a.format(file=secret) for a in argv])
    with pytest.raises(ConfigError, match="give the Cassandra password once") as caught:
        cfg.from_args(CassandraConfig, args, env=env)
    assert "from-file" not in str(caught.value) and "pw-given" not in str(caught.value)


def test_an_unreadable_password_file_is_refused_naming_it(tmp_path):
    missing = tmp_path / "no-such-password"
    with pytest.raises(ConfigError, match=f"--cassandra-password-file.*{re.escape(str(missing))}.*No such file"):
        cfg.resolve(CassandraConfig, env={"STATESTORE_CASSANDRA_PASSWORD_FILE": str(missing)})
    with pytest.raises(ConfigError, match=re.escape(f"cannot read the password file {tmp_path}")):
        cfg.resolve(CassandraConfig, env={"STATESTORE_CASSANDRA_PASSWORD_FILE": str(tmp_path)})  # a directory
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match=re.escape(f"password file {empty} is empty")):
        cfg.resolve(CassandraConfig, env={"STATESTORE_CASSANDRA_PASSWORD_FILE": str(empty)})
