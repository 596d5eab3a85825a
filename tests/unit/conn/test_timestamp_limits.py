"""The rule `statestore produce --timestamped` checks every line with before sending any: the
broker's limits on how far a record's CreateTime may be from its clock (the broker's own
refusals are tested in tests/integration/cli/test_produce_timestamped.py)."""

from __future__ import annotations

import pytest

from statestore.conn.kafka import TimestampLimits
from statestore.core.event_time import TimestampedLineError

NOW = 1_800_000_000_000
HOUR = 3_600_000
DAY = 24 * HOUR


def _limits(**overrides) -> TimestampLimits:
    given = {
        "where": "topic 'words'",
        "after_ms": HOUR,
        "after_name": "message.timestamp.after.max.ms",
        "before_ms": DAY,
        "before_name": "message.timestamp.before.max.ms",
    }
    return TimestampLimits(**{**given, **overrides})


def test_a_time_at_either_limit_passes():
    for stamp in (NOW + HOUR, NOW - DAY, NOW, 1 + NOW - DAY):
        _limits().check(7, stamp, NOW)


def test_a_time_past_the_after_limit_is_named_with_the_limit():
    with pytest.raises(TimestampedLineError) as refused:
        _limits().check(7, NOW + 2 * HOUR, NOW)
    assert str(refused.value).startswith(f"line 7: time {NOW + 2 * HOUR} (2027-01-15T10:00:00Z) is 2h ahead of")
    assert "past the limit of topic 'words': 3600000 ms (1h) ahead of the broker's clock" in str(refused.value)
    assert "(message.timestamp.after.max.ms); nothing sent" in str(refused.value)


def test_a_time_past_the_before_limit_is_named_with_the_limit():
    with pytest.raises(TimestampedLineError, match=r"line 3: .* is 1d1s behind .* 86400000 ms \(1d\) behind"):
        _limits().check(3, NOW - DAY - 1000, NOW)


def test_log_append_time_refuses_nothing():
    _limits(log_append_time=True).check(1, NOW + 1000 * DAY, NOW)
