"""The CLI's one rule (docs/cli.md, Conventions), held over every command the parser has, so a
new command is held to it too: the store is the first argument, `--yes` is the one confirmation,
one `--format` with the same choices wherever a command prints rows or a record, and the
connection options are accepted before or after every command. The spellings from before the
rule still work for one release, each with a warning, and nothing in the project uses them."""

from __future__ import annotations

import argparse
import functools
import re
from pathlib import Path

import pytest

from statestore.cli import args as cli_args
from statestore.cli import main as cli_main
from statestore.cli.args import FORMATS, VALUE
from statestore.cli.main import build_parser, main
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig

ROOT = Path(__file__).resolve().parents[3]


@functools.cache
def _parser() -> argparse.ArgumentParser:
    return build_parser()  # built once: parsing leaves it as it was


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


COMMANDS = sorted(_commands())

# Commands that only say what they did, in a sentence or two: no rows, so no --format. A new
# command is either here or takes the one --format (test_one_format_wherever_output_is_tabular).
SAYS_WHAT_IT_DID = {
    "create-keyspace",
    "create-topic",
    "produce",
    "create-store",
    "set-retention",
    "migrate",
    "relayout",
    "reset",
    "serve",
}
# A positional's sample value by its name (a store name fits every other one).
SAMPLES = {"retention": "7d", "file": "input.txt", "key": "k"}
# What a command needs beyond its positionals to reach its confirmation.
TO_CONFIRM = {"relayout": ["--drop-table", "sample_store_r1"]}


def _visible_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS and a.dest != "help"]


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not a.option_strings]


def _argv(name: str) -> list[str]:
    """The command with a sample value for each of its positionals."""
    return [name, *(SAMPLES.get(a.dest, "sample") for a in _positionals(_commands()[name]))]


# -- the store is the first argument ----------------------------------------------------------


@pytest.mark.parametrize("name", COMMANDS)
def test_a_store_is_the_first_argument(name):
    parser = _commands()[name]
    for action in _visible_options(parser):  # no visible --store STORE, whatever its flag
        assert action.dest != "store" and action.metavar != "STORE", f"{name}: {action.option_strings}"
        assert "store's name" not in (action.help or ""), f"{name}: {action.option_strings} names the store"
    stores = [a for a in _positionals(parser) if a.dest == "store"]
    if stores:
        assert _positionals(parser)[0] is stores[0], f"{name}: STORE is not the first argument"
        assert stores[0].type is cli_args.store_name  # checked while parsing, before connecting
        args = _parser().parse_args(_argv(name))
        cli_args.deprecated_spellings(args)
        assert args.store == "sample"


# -- one confirmation flag --------------------------------------------------------------------


@pytest.mark.parametrize("name", COMMANDS)
def test_yes_is_the_one_confirmation(name, capsys):
    parser = _commands()[name]
    confirming = [a for a in _visible_options(parser) if "confirm" in (a.help or "").lower()]
    assert all(a.option_strings == ["--yes"] and a.nargs == 0 for a in confirming), [
        a.option_strings for a in confirming
    ]
    flags = {f for a in _visible_options(parser) for f in a.option_strings}
    assert not flags & {"--confirm", "--force", "-f", "-y", "--assume-yes"}, sorted(flags)
    if confirming:  # refused without it, before anything is connected (an unreachable Cassandra: exit 5)
        assert main([*_argv(name), *TO_CONFIRM.get(name, []), "--cassandra-port", "1"]) == 4
        err = capsys.readouterr().err
        assert "add --yes" in err and "cannot reach" not in err


# -- one --format -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", COMMANDS)
def test_one_format_wherever_output_is_tabular(name):
    parser = _commands()[name]
    action = next((a for a in parser._actions if a.dest == "format"), None)
    if name in SAYS_WHAT_IT_DID:
        assert action is None, f"{name} prints rows: take it out of SAYS_WHAT_IT_DID"
        return
    assert action is not None, f"{name}: no --format (or, if it only says what it did, list it in SAYS_WHAT_IT_DID)"
    assert action.option_strings == ["--format"]
    assert tuple(action.choices) in (FORMATS, (VALUE, *FORMATS)), action.choices
    default = VALUE if VALUE in action.choices else "table"
    if action.default is None:  # an old default, kept for one release, deprecated
        assert any(old.startswith("no --format") for old in cli_args.deprecations(parser)), name
        assert f"{default} from the next release" in action.help
    else:
        assert action.default == default


# -- connection options anywhere ---------------------------------------------------------------

CONNECTION = [("--keyspace", "ks_anywhere", CassandraConfig, "keyspace")]
CONNECTION += [("--kafka-bootstrap", "elsewhere:9092", KafkaConfig, "bootstrap_servers")]


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize(("flag", "value", "cls", "field"), CONNECTION)
def test_connection_options_are_accepted_anywhere(name, flag, value, cls, field):
    before = _parser().parse_args([flag, value, *_argv(name)])
    after = _parser().parse_args([*_argv(name), flag, value])
    listed = {f for a in _visible_options(_commands()[name]) for f in a.option_strings}
    for args in (before, after):
        if flag in listed:  # used: it counts, wherever it was given
            assert getattr(cfg.from_args(cls, args, env={}), field) == value
            assert cli_args.unused_connection(args) == []
        else:  # not used: accepted, and said to have no effect, wherever it was given
            assert cli_args.unused_connection(args) == [flag]


def test_an_unused_connection_option_warns_before_and_after(monkeypatch, capsys):
    monkeypatch.setattr(cli_main, "cmd_create_topic", lambda args: 0)
    for argv in (["create-topic", "t", "--keyspace", "k"], ["--keyspace", "k", "create-topic", "t"]):
        assert main(argv) == 0
        assert (
            capsys.readouterr().err
            == "warning: --keyspace is not used by `statestore create-topic` and has no effect\n"
        )


# -- the spellings from before the rule: one more release, with a warning ---------------------

OLD = {
    "set-retention --store STORE": (["set-retention", "--store", "s", "7d"], {"store": "s", "retention": 604800000}),
    "migrate --store STORE": (["migrate", "--store", "s"], {"store": "s"}),
    "relayout --confirm STORE": (["relayout", "s", "--drop-table", "s_store_r1", "--confirm", "s"], {"confirm": "s"}),
    "dump no --format: csv": (["dump", "s"], {"format": "csv"}),
}


def test_every_deprecated_spelling_is_tested_and_in_the_changelog():
    registered = {f"{name} {old}" for name, parser in _commands().items() for old in cli_args.deprecations(parser)}
    assert registered == set(OLD)
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for spelling in ("set-retention --store STORE", "migrate --store STORE", "--confirm STORE", "dump` without"):
        assert spelling in changelog


@pytest.mark.parametrize("spelling", sorted(OLD))
def test_a_deprecated_spelling_still_works_with_a_warning(spelling):
    argv, expected = OLD[spelling]
    args = _parser().parse_args(argv)
    warnings = cli_args.deprecated_spellings(args)
    assert {k: getattr(args, k) for k in expected} == expected
    assert len(warnings) == 1 and warnings[0].startswith("warning: `statestore ") and "deprecated" in warnings[0]


def test_the_new_spellings_warn_nothing():
    for argv in (["set-retention", "s", "7d"], ["migrate", "s"], ["migrate"], ["dump", "s", "--format", "csv"]):
        args = _parser().parse_args(argv)
        assert cli_args.deprecated_spellings(args) == []
    args = _parser().parse_args(["relayout", "s", "--drop-table", "s_store_r1", "--yes"])
    assert cli_args.deprecated_spellings(args) == [] and args.yes


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["set-retention", "7d"], "needs a store"),
        (["set-retention", "a", "7d", "--store", "b"], "two stores"),
    ],
)
def test_a_store_given_twice_or_not_at_all_is_a_usage_error(capsys, argv, message):
    assert main([*argv, "--cassandra-port", "1"]) == 2
    err = capsys.readouterr().err
    assert message in err and "cannot reach" not in err


OLD_SPELLINGS = re.compile(
    r"(set-retention|migrate) --store|--confirm (STORE|\{|\w)"  # in text
    r'|"(set-retention|migrate)", [^\]\n]*"--store"|"--confirm"'  # in an argv list
)


def test_nothing_in_the_project_uses_an_old_spelling():
    places = ["README.md", "Makefile", "docs", "dags", "plugins", "scripts", "statestore", "tests/integration"]
    found = []
    for place in places:
        path = ROOT / place
        for file in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
            if file.suffix not in ("", ".md", ".py", ".sh") or file.name.lower() in ("cli.md", "changelog.md"):
                continue  # the reference and the changelog list them
            if file.is_relative_to(ROOT / "statestore" / "cli"):  # the parser, which still accepts them
                continue
            text = file.read_text(encoding="utf-8", errors="replace")
            found += [f"{file.relative_to(ROOT)}: {m.group(0)}" for m in OLD_SPELLINGS.finditer(text)]
    assert found == []
