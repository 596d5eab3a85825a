"""Progress bars of the command line: drawn on a terminal, silent when stderr is piped, and the
items pass through unchanged either way."""

import io
import sys

import pytest

from statestore.cli.progress import tracked


@pytest.mark.parametrize("tty", [True, False])
def test_items_pass_through_and_the_bar_shows_only_on_a_terminal(monkeypatch, tty):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    lines = [b"alpha beta", b"", b"gamma"]
    out = list(tracked(iter(lines), 19, "producing f.txt", "B", lambda line: len(line) + 1, tty=tty))
    assert out == lines
    drawn = err.getvalue()
    if tty:
        assert "producing f.txt" in drawn and "/19 " in drawn  # tqdm throttles redraws; leave=False clears it
    else:
        assert drawn == ""


def test_a_count_past_the_estimate_is_capped_not_an_error(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert list(tracked(range(5), 3, "dumping s", "entries", tty=True)) == [0, 1, 2, 3, 4]
