"""The CLI's command line, without a stack: connection options before or after the command,
each command's --help listing only what it uses, one --format, times, exit codes, and names
refused before anything is connected."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
from pathlib import Path

import pytest
from cassandra.cluster import NoHostAvailable

from statestore.cli import args as cli_args
from statestore.cli import exits, queries, reference
from statestore.cli import main as cli_main
from statestore.cli.main import build_parser, main
from statestore.cli.output import emit, emit_record
from statestore.conn import kafka as kafka_io
from statestore.core import config as cfg
from statestore.core import errors
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.event_time import TimestampedLineError
from statestore.store.book.lease import LeaseHeldError

ROOT = Path(__file__).resolve().parents[3]


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _listed(parser: argparse.ArgumentParser) -> set[str]:
    """The option flags a parser's --help shows."""
    return {
        flag
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for flag in action.option_strings
        if flag not in ("-h", "--help")
    }


# -- connection options before or after the command ------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--keyspace", "ks1", "--cassandra-port", "9043", "get", "s", "x"],
        ["get", "s", "x", "--keyspace", "ks1", "--cassandra-port", "9043"],
        ["--keyspace", "ks1", "get", "s", "x", "--cassandra-port", "9043"],
    ],
)
def test_connection_options_before_or_after_the_command(argv):
    args = build_parser().parse_args(argv)
    config = cfg.from_args(CassandraConfig, args, env={})
    assert (config.keyspace, config.port, args.store, args.key) == ("ks1", 9043, "s", "x")


def test_after_the_command_wins_and_unset_falls_through_to_the_environment():
    args = build_parser().parse_args(["--keyspace", "before", "count", "s", "--keyspace", "after"])
    assert cfg.from_args(CassandraConfig, args, env={}).keyspace == "after"
    args = build_parser().parse_args(["count", "s"])
    assert cfg.from_args(CassandraConfig, args, env={"STATESTORE_KEYSPACE": "fromenv"}).keyspace == "fromenv"


def test_kafka_options_before_the_command():
    args = build_parser().parse_args(["--kafka-bootstrap", "k:1", "status", "s", "--keyspace", "ks"])
    assert cfg.from_args(KafkaConfig, args, env={}).bootstrap_servers == "k:1"
    args = build_parser().parse_args(["--kafka-bootstrap", "k:1", "create-topic", "t"])
    assert cfg.from_args(KafkaConfig, args, env={}).bootstrap_servers == "k:1"


def test_a_password_before_the_command_warns_too(capsys):
    args = build_parser().parse_args(["--cassandra-password", "pw", "stores"])
    assert cfg.from_args(CassandraConfig, args, env={}).password == "pw"
    assert "--cassandra-password is visible to other users" in capsys.readouterr().err


# -- each command lists only what it uses ------------------------------------------------------

WRITE_ONLY = {
    "--write-concurrency",
    "--retry-budget",
    "--bookkeeping-consistency",
    "--serial-consistency",
    "--ddl-consistency",
    "--kafka-fetch-max-wait-ms",
    "--kafka-isolation-level",
    "--topic-replication",
    "--min-insync-replicas",
}
READS = ("get", "range", "prefix", "all", "count", "history", "windows", "sessions", "dump", "top", "stores")
READS += ("deadletters", "status", "describe", "serve")


@pytest.mark.parametrize("name", READS)
def test_read_commands_list_no_write_settings(name):
    listed = _listed(_commands(build_parser())[name])
    assert not listed & WRITE_ONLY, sorted(listed & WRITE_ONLY)
    assert {"--keyspace", "--cassandra-hosts", "--dml-consistency"} <= listed
    kafka = {"--kafka-bootstrap", "--kafka-security-protocol"}
    assert (kafka <= listed) == (name == "status") and (kafka & listed == set()) == (name != "status")


def test_writing_and_kafka_commands_list_what_they_use():
    commands = _commands(build_parser())
    assert {"--ddl-consistency", "--serial-consistency", "--bookkeeping-consistency"} <= _listed(commands["reset"])
    assert "--ddl-consistency" in _listed(commands["create-keyspace"])
    for name in ("create-topic", "produce"):
        listed = _listed(commands[name])
        assert {"--kafka-bootstrap", "--topic-replication", "--min-insync-replicas"} <= listed
        assert not listed & {"--keyspace", "--kafka-isolation-level", "--kafka-fetch-max-wait-ms"}


def test_connection_options_sit_under_a_titled_group():
    get = _commands(build_parser())["get"]
    titles = {g.title: {f for a in g._group_actions for f in a.option_strings} for g in get._action_groups}
    assert "--keyspace" in titles[cli_args.CASSANDRA_TITLE] and "--cassandra-port" in titles[cli_args.CASSANDRA_TITLE]
    help_text = get.format_help()
    assert cli_args.CASSANDRA_TITLE in help_text and "--write-concurrency" not in help_text


def test_settings_groups_cover_every_setting_once():
    for cls, groups in (
        (
            CassandraConfig,
            (
                cli_args.CASSANDRA_CONNECTION,
                cli_args.CASSANDRA_READS,
                cli_args.CASSANDRA_DDL,
                cli_args.CASSANDRA_BOOKKEEPING,
            ),
        ),
        (KafkaConfig, (cli_args.KAFKA_CONNECTION, cli_args.KAFKA_TOPICS)),
    ):
        grouped = [name for group in groups for name in group]
        assert len(grouped) == len(set(grouped))
        assert set(grouped) <= {f.name for f in dataclasses.fields(cls)}


def test_a_setting_a_command_does_not_use_is_accepted_with_a_warning(capsys, estimated):
    args = build_parser().parse_args(["count", "s", "--write-concurrency", "3"])
    assert cli_args.ignored_settings(args) == ["--write-concurrency"]
    assert cli_args.ignored_settings(build_parser().parse_args(["count", "s", "--keyspace", "k"])) == []
    assert cfg.from_args(CassandraConfig, args, env={}).write_concurrency == 3  # still resolved: harmless
    assert main(["count", "s", "--write-concurrency", "3"]) == 0
    assert "warning: --write-concurrency is not used by `statestore count`" in capsys.readouterr().err


def test_the_top_level_help_ends_with_the_exit_codes():
    help_text = build_parser().format_help()
    epilog = help_text[help_text.index("exit codes:") :]
    for code in range(6):
        assert f"\n  {code}  " in epilog
    assert "usage error" in epilog and "not found" in epilog and "refused" in epilog and "unavailable" in epilog


# -- one --format --------------------------------------------------------------------------


def _format_choices(parser):
    action = next((a for a in parser._actions if a.dest == "format"), None)
    return None if action is None else (tuple(action.choices), action.default)


def test_format_choices_and_defaults_per_command():
    commands = _commands(build_parser())
    rows = ("table", "csv", "json", "jsonl")
    expected = {
        "get": (("value", *rows), "value"),
        "count": (("value", *rows), "value"),
        "dump": (rows, None),  # csv, deprecated, until the next release: table (test_cli_rules)
        "status": (rows, "table"),
        "describe": (rows, "table"),
    }
    for name in ("range", "prefix", "all", "history", "windows", "sessions", "top", "stores", "deadletters"):
        expected[name] = (rows, "table")
    for name in ("create-keyspace", "create-topic", "produce", "reset", "serve"):
        expected[name] = None
    for name in ("create-store", "set-retention", "relayout", "migrate"):  # what was done, as lines
        expected[name] = None
    assert {name: _format_choices(p) for name, p in commands.items()} == expected


def test_json_rows_are_one_array(capsys):
    emit(iter([("a", 1), ("b", b"\x01")]), ("key", "value"), "json")
    emit(iter([]), ("key", "value"), "json")
    out = capsys.readouterr().out
    first, second = out[: out.index("]\n") + 2], out[out.index("]\n") + 2 :]
    assert json.loads(first) == [{"key": "a", "value": 1}, {"key": "b", "value": "01"}]
    assert json.loads(second) == []


# -- times -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "millis"),
    [
        ("1764201600000", 1_764_201_600_000),
        ("0", 0),
        ("2025-11-27", 1_764_201_600_000),
        ("2025-11-27T00:00:00Z", 1_764_201_600_000),
        ("2025-11-27T01:00:00+01:00", 1_764_201_600_000),
        ("2025-11-27T00:00:00.250", 1_764_201_600_250),
    ],
)
def test_time_forms(raw, millis):
    assert cli_args.parse_time(raw) == millis


@pytest.mark.parametrize("raw", ["yesterday", "-5", "1969-12-31", str(2**63)])
def test_bad_times_are_usage_errors(raw):
    with pytest.raises(argparse.ArgumentTypeError):
        cli_args.parse_time(raw)


@pytest.mark.parametrize("command", [["history", "s", "k"], ["windows", "s"]])
def test_history_and_windows_take_the_same_time_forms(command):
    args = build_parser().parse_args([*command, "--from", "2025-11-27", "--to", "1764201600001"])
    assert (args.from_ms, args.to_ms) == (1_764_201_600_000, 1_764_201_600_001)
    args = build_parser().parse_args(["get", "s", "k", "--as-of", "2025-11-27T00:00:00Z"])
    assert args.as_of == 1_764_201_600_000


def test_each_bound_says_what_it_means():
    commands = _commands(build_parser())

    def helps(name):
        return {a.dest: a.help for a in commands[name]._actions}

    assert "inclusive" in helps("range")["from_key"] and "not a time" in helps("range")["from_key"]
    assert "inclusive" in helps("range")["to_key"]
    assert "(inclusive" in helps("history")["from_ms"] and "(exclusive" in helps("history")["to_ms"]
    assert "(inclusive" in helps("windows")["from_ms"] and "(inclusive" in helps("windows")["to_ms"]
    assert "ISO 8601" in helps("history")["to_ms"] and "ISO 8601" in helps("windows")["to_ms"]


# -- exit codes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (errors.StoreNotFoundError("no store"), 3),
        (errors.KeyspaceMissingError("no keyspace"), 3),
        (exits.KeyNotFoundError("no key"), 3),
        (errors.ConfirmationRequiredError("add --yes"), 4),
        (LeaseHeldError("held"), 4),
        (errors.StoreFencedError("fenced"), 4),
        (errors.WriterMayBeLiveError("live"), 4),
        (errors.CassandraUnavailableError("down"), 5),
        (errors.KafkaError("down"), 5),
        (NoHostAvailable("down", {}), 5),
        (errors.InvalidNameError("bad"), 2),
        (errors.ConfigError("bad"), 2),
        (errors.CodecError("bad"), 2),
        (errors.UnsupportedOperationError("no"), 2),
        (TimestampedLineError("line 2"), 2),
        (errors.StoredDataError("bytes"), 1),
        (errors.StateStoreError("other"), 1),
        (RuntimeError("bug"), 1),
    ],
)
def test_exit_codes_of_the_librarys_errors(exc, code):
    assert exits.exit_code(exc) == code


def test_exit_codes_are_distinct_and_documented():
    codes = [exits.OK, exits.UNEXPECTED, exits.USAGE, exits.NOT_FOUND, exits.REFUSED, exits.UNAVAILABLE]
    assert codes == [0, 1, 2, 3, 4, 5] and set(exits.MEANINGS) == set(codes)


@pytest.mark.parametrize(
    ("exc", "code"),
    [(errors.StoreNotFoundError("no store 's'"), 3), (errors.CassandraUnavailableError("cannot reach"), 5)],
)
def test_main_returns_the_mapped_code_and_one_line(monkeypatch, capsys, exc, code):
    def fail(args):
        raise exc

    monkeypatch.setattr(queries, "open_from_args", lambda args, count_all=False: fail(args))
    assert main(["count", "s"]) == code
    assert capsys.readouterr().err == f"statestore: {exc}\n"


def test_the_unreachable_kafka_hint_names_the_make_target():
    hint = str(kafka_io._unreachable(KafkaConfig(bootstrap_servers="127.0.0.1:1"), OSError("refused")))
    assert "For the local stack run `make stack-up`" in hint


def test_usage_errors_are_returned_as_2(capsys):
    assert main(["get", "s"]) == 2  # the key is missing
    assert main(["nosuchcommand"]) == 2
    assert main(["--help"]) == 0
    capsys.readouterr()


def test_reset_without_yes_is_refused_not_a_usage_error(capsys):
    assert main(["reset", "s"]) == 4
    assert "add --yes" in capsys.readouterr().err


# -- names and arguments before any connection ----------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["get", "Bad;Name", "x"],
        ["dump", "Bad;Name"],
        ["windows", "Bad;Name"],
        ["status", "Bad;Name"],
        ["describe", "Bad;Name"],
        ["reset", "Bad;Name", "--yes"],
        ["deadletters", "Bad;Name"],
    ],
)
def test_a_bad_store_name_is_refused_before_connecting(monkeypatch, capsys, argv):
    def no_connection(*_args, **_kwargs):
        raise AssertionError("a connection was opened")

    for module in (queries, cli_main, cli_main.status):
        monkeypatch.setattr(module, "session_for", no_connection)
    # An unreachable Cassandra: had it connected, the error would be "cannot reach Cassandra" (exit 5).
    assert main([*argv, "--cassandra-port", "1"]) == 2
    err = capsys.readouterr().err
    assert "invalid store name 'Bad;Name'" in err and "cannot reach" not in err


def test_a_bad_name_with_an_unreachable_cassandra_is_the_name_error(capsys):
    assert main(["--cassandra-port", "1", "get", "Bad;Name", "x"]) == 2
    err = capsys.readouterr().err
    assert "invalid store name" in err and "cannot reach Cassandra" not in err


def test_a_bad_time_is_refused_before_connecting(capsys):
    assert main(["--cassandra-port", "1", "windows", "s", "--from", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert "'yesterday' is not a time" in err and "cannot reach" not in err


# -- count is exact; --estimate says "about" --------------------------------------------------


class _Figures:
    complete, nodes_answered, nodes_total, nodes_failed = True, 1, 1, ()


class _Store:
    session = None
    spec = type("Spec", (), {"keyspace": "ks", "table": "t"})()

    def approximate_num_entries(self):
        self.asked.append("estimate")
        return 7821

    def count_entries(self):
        self.asked.append("exact")
        return 7821


@pytest.fixture
def estimated(monkeypatch):
    """A store of 7,821 entries, counted or estimated: which was asked, in the list returned."""
    store = _Store()
    store.asked = []
    monkeypatch.setattr(queries, "open_from_args", lambda args, count_all=False: store)
    monkeypatch.setattr(queries, "cluster_figures", lambda *a: _Figures())
    return store.asked


@pytest.mark.parametrize("exact", [[], ["--exact"]])
def test_count_is_exact_by_default(capsys, estimated, exact):
    assert main(["count", "sample", *exact]) == 0
    out, err = capsys.readouterr()
    assert estimated == ["exact"] and out == "7821\n" and "about" not in err
    assert main(["count", "sample", "--format", "json", *exact]) == 0
    assert json.loads(capsys.readouterr().out) == {"store": "sample", "entries": 7821, "exact": True, "estimate": False}


def test_count_table_says_about_and_how_to_count_exactly(capsys, estimated):
    assert main(["count", "sample", "--estimate", "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert estimated == ["estimate"] and "about 7,821" in out.splitlines()[1] and "without --estimate" in out


def test_count_value_of_the_estimate_is_asked_for_by_name(capsys, estimated):
    assert main(["count", "sample", "--estimate"]) == 0
    out, err = capsys.readouterr()
    assert out == "7821\n" and "about 7,821" in err and "--estimate" in err


def test_count_json_marks_the_estimate(capsys, estimated):
    assert main(["count", "sample", "--estimate", "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found == {"store": "sample", "entries": 7821, "exact": False, "estimate": True}


def test_count_exact_and_estimate_together_is_a_usage_error(capsys, estimated):
    assert main(["count", "sample", "--exact", "--estimate"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err and estimated == []


def test_a_record_as_csv_is_a_header_and_one_row():
    out = io.StringIO()
    emit_record({"store": "s", "lag": [{"partition": 0, "lag": 3}], "writer": None, "up": True}, "csv", "", out)
    assert out.getvalue() == 'store,lag,writer,up\ns,"[{""lag"":3,""partition"":0}]",,true\n'


# -- the generated reference -------------------------------------------------------------------


def test_docs_cli_md_is_what_the_parser_generates():
    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert committed == reference.markdown(), "regenerate: python -m statestore.cli.reference > docs/cli.md"


def test_the_reference_has_a_heading_per_command_and_the_exit_codes():
    page = reference.markdown()
    for name in _commands(build_parser()):
        assert f"\n### {name}\n" in page
    assert "## Exit codes" in page and "| 4 |" in page


def test_the_reference_does_not_depend_on_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    narrow = reference.markdown()
    monkeypatch.setenv("COLUMNS", "200")
    assert reference.markdown() == narrow
