"""Durations and timestamped lines: what people type, read exactly or refused with the fix."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statestore.core.durations import format_duration, parse_duration
from statestore.core.event_time import MAX_EVENT_MS, TimedValue, TimestampedLineError, parse_timestamped_line


@pytest.mark.parametrize(
    ("text", "millis"), [("500ms", 500), ("30s", 30_000), ("1m", 60_000), ("2h", 7_200_000), ("7d", 604_800_000)]
)
def test_durations_read_in_their_unit(text, millis):
    assert parse_duration(text) == millis


@pytest.mark.parametrize("text", ["", "1", "1 minute", "-1m", "0s", "1.5m", "m", "1mm"])
def test_a_duration_without_a_positive_count_and_unit_is_refused_with_the_form(text):
    with pytest.raises(ValueError, match=r"(ms, s, m, h, d)|longer than 0"):
        parse_duration(text, "--window")


@given(st.integers(min_value=1, max_value=10**12))
def test_format_duration_reads_back(millis):
    assert parse_duration(format_duration(millis)) == millis


def test_a_timestamped_line_splits_at_the_first_tab_and_keeps_bytes():
    assert parse_timestamped_line(1, b"1764000000000\thello\tworld \xff") == TimedValue(
        b"hello\tworld \xff", 1_764_000_000_000
    )
    assert parse_timestamped_line(2, b"5\t") == TimedValue(b"", 5)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"hello world", "line 7: no TAB"),
        (b"12ab\thello", "line 7: '12ab' is not a time in epoch milliseconds"),
        (b"-5\thello", "line 7: '-5' is not a time"),
        (b"\thello", "line 7: '' is not a time"),
        (b"0\thello", "line 7: time 0 cannot be sent"),
        (f"{MAX_EVENT_MS + 1}\thello".encode(), "past 9999-12-31"),
    ],
)
def test_a_bad_timestamped_line_is_named(line, message):
    with pytest.raises(TimestampedLineError, match=message):
        parse_timestamped_line(7, line)
