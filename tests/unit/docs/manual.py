"""README.md and the manual in docs/, read for the docs tests."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> dict[str, str]:
    """README.md and every page of the manual, by path relative to the repository."""
    files = [README, *sorted(DOCS.glob("*.md"))]
    return {str(path.relative_to(ROOT)): path.read_text() for path in files}


def code_of(text: str) -> list[str]:
    """The fenced code blocks (without shell comments) and inline code spans of a Markdown text:
    where commands are named."""
    fences = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    commands = [re.sub(r"(^|\s)#.*$", "", block, flags=re.M) for block in fences]  # not their comments
    return commands + re.findall(r"`([^`\n]+)`", prose)


def section(text: str, heading: str) -> str:
    """The body of the section under `heading` (a whole heading line), up to the next heading of its level."""
    level = heading.split(" ", 1)[0]
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    end = re.search(rf"^{level} ", text[start:], re.M)
    return text[start : start + end.start()] if end else text[start:]
