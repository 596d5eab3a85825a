"""A Cassandra password on the command line still works, with a warning on stderr: every user of
the machine can read a process's arguments."""

from __future__ import annotations

from statestore.cli.main import build_parser
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig


def test_a_password_flag_works_and_warns_naming_the_alternatives(capsys):
    args = build_parser().parse_args(["stores", "--cassandra-password", "s3cret-flag"])
    assert cfg.from_args(CassandraConfig, args, env={}).password == "s3cret-flag"
    err = capsys.readouterr().err
    assert "warning: --cassandra-password is visible to other users" in err and "ps" in err
    assert "STATESTORE_CASSANDRA_PASSWORD" in err and "--cassandra-password-file" in err
    assert "s3cret-flag" not in err


def test_no_warning_without_the_password_flag(capsys, tmp_path):
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    build_parser().parse_args(["stores", "--cassandra-password-file", str(secret), "--keyspace", "ks"])
    assert capsys.readouterr().err == ""
