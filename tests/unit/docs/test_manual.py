"""The README is a first screen and the manual documents every setting and command the code offers;
every command either names exists."""

from __future__ import annotations

import dataclasses
import re

import pytest

from statestore.cli.main import build_parser
from statestore.core.config import CassandraConfig, KafkaConfig, StreamConfig
from statestore.http.serving import ServeConfig

from .manual import DOCS, README, ROOT, code_of, pages, section

SETTINGS = section((DOCS / "streaming-job.md").read_text(), "## Settings")
SETTING_ROWS = [line for line in SETTINGS.splitlines() if line.startswith("| ")]


def subcommands() -> set[str]:
    """The CLI's subcommands, read from the parser as it is now."""
    return set(build_parser()._subparsers._group_actions[0].choices)


def make_targets() -> set[str]:
    """The Makefile's rules (not its variable assignments)."""
    makefile = (ROOT / "Makefile").read_text()
    return {
        target
        for line in re.findall(r"^([A-Za-z0-9_.\- ]+):(?!=)", makefile, re.M)
        for target in line.split()
        if not target.startswith(".")
    }


def named(pattern: str) -> list[tuple[str, str]]:
    """(page, name) for every command the README and the manual name in their code."""
    return sorted(
        {(page, name) for page, text in pages().items() for code in code_of(text) for name in re.findall(pattern, code)}
    )


def test_the_readme_is_one_screen_of_what_it_is():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move the detail into docs/"
    text = "\n".join(lines)
    # the two commands come first, before any other section
    first_section = re.search(r"^## (.*)$", text, re.M).group(1)
    assert first_section == "The two commands"
    assert "make run" in text and "make test" in text
    assert "Install into your Airflow" in text


@pytest.mark.parametrize(
    "setting",
    [f for cls in (CassandraConfig, KafkaConfig, StreamConfig, ServeConfig) for f in dataclasses.fields(cls)],
    ids=lambda f: f.name,
)
def test_every_setting_is_a_row_of_the_settings_table_with_its_flag_and_variable(setting):
    env, flag = f"`{setting.metadata['env']}`", f"`{setting.metadata['flag']}`"
    if setting.metadata["flag"] is None:  # a secret without a flag: the row says so
        flag = "none: environment only"
    rows = [row for row in SETTING_ROWS if env in row]
    assert rows, f"{env} is in no row of the settings table (docs/streaming-job.md, Settings)"
    assert any(flag in row for row in rows), f"{flag} is not in the row of {env}"


def test_every_cli_command_is_documented():
    manual = "\n".join(pages().values())
    for name in sorted(subcommands()):
        assert f"`statestore {name}" in manual, name


@pytest.mark.parametrize("page, target", named(r"(?<![\w/.-])make ([a-z][a-z0-9-]*)"))
def test_every_make_target_named_exists(page, target):
    assert target in make_targets(), f"{page} names `make {target}`, which the Makefile does not define"


@pytest.mark.parametrize("page, command", named(r"(?<![\w/.-])statestore ([a-z][a-z-]*)"))
def test_every_statestore_command_named_exists(page, command):
    assert command in subcommands(), f"{page} names `statestore {command}`, which the CLI's parser does not have"


def test_the_readme_and_the_ci_run_the_same_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^\S*\s*make test\b", ci, re.M), ".ci/run must run `make test`, the README's test command"
    assert "make test   #" in README.read_text()


def test_the_readmes_links_resolve():
    """mkdocs --strict checks the links between the manual's pages; this checks the README's."""
    from markdown.extensions.toc import slugify

    text = README.read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        assert (ROOT / path).exists(), f"README.md links to {path}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.*)$", (ROOT / path).read_text(), re.M)
            assert anchor in {slugify(h, "-") for h in headings}, f"README.md links to {target}: no such heading"


@pytest.mark.parametrize("page", sorted(pages()))
def test_every_code_fence_is_closed_on_a_line_of_its_own(page):
    """A closing fence with text after it (```` ``` A mistake ... ````) is no closing fence in
    Markdown: the block, and every heading after it, rendered as code (docs/airflow.md's REST
    example swallowed the rest of the page), and mkdocs --strict says nothing."""
    opened = None
    for number, line in enumerate(pages()[page].splitlines(), 1):
        if not line.startswith("```"):
            continue
        if opened is None:
            opened = number
        else:
            assert line.rstrip() == "```", f"{page}:{number}: the block of line {opened} closes with text after it"
            opened = None
    assert opened is None, f"{page}: the code block opened on line {opened} is never closed"
