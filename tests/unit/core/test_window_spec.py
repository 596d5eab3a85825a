"""A window store's description: its windowing is part of its layout, required for window
types and refused for the others; the stream's window settings are checked together."""

import pytest

from statestore.core import config as cfg
from statestore.core.config import StreamConfig
from statestore.core.errors import ConfigError, OptionError
from statestore.core.model import StoreSpec, StoreType
from statestore.core.windows import SessionSpec, WindowSpec

MINUTE = WindowSpec(60_000)


def test_a_window_store_needs_its_windowing_and_other_types_refuse_one():
    with pytest.raises(OptionError, match="needs its windowing"):
        StoreSpec("ks", "w", StoreType.PARTITIONED_WINDOW, 4)
    with pytest.raises(OptionError, match="has no windows"):
        StoreSpec("ks", "w", StoreType.PARTITIONED_KV, 4, windowing=MINUTE)
    assert StoreType.PARTITIONED_WINDOW.windowed and StoreType.PARTITIONED_WINDOW.partitioned
    assert not any(t.windowed for t in StoreType if t is not StoreType.PARTITIONED_WINDOW)


def test_size_hop_and_segment_are_layout_grace_and_retention_are_not():
    spec = StoreSpec("ks", "w", StoreType.PARTITIONED_WINDOW, 4, windowing=MINUTE)
    same_rows = StoreSpec("ks", "w", StoreType.PARTITIONED_WINDOW, 4, windowing=WindowSpec(60_000, grace_ms=5))
    other_segments = StoreSpec(
        "ks", "w", StoreType.PARTITIONED_WINDOW, 4, windowing=WindowSpec(60_000, retention_ms=7_200_000)
    )
    assert spec.layout == same_rows.layout
    assert spec.layout != other_segments.layout
    assert WindowSpec(**MINUTE.as_dict()) == MINUTE


BASE = {"STATESTORE_TOPIC": "t", "STATESTORE_STORE": "w", "STATESTORE_CHECKPOINT": "/tmp/c"}


def test_the_stream_counts_in_windows_from_its_duration_flags():
    stream = cfg.resolve(StreamConfig, env={**BASE, "STATESTORE_WINDOW": "1m", "STATESTORE_HOP": "20s"})
    assert stream.windowing == WindowSpec(60_000, 20_000)
    assert stream.windowing.panes, "the word count keeps hopping windows as panes"
    assert cfg.resolve(StreamConfig, env=BASE).windowing is None
    graced = cfg.resolve(StreamConfig, env={**BASE, "STATESTORE_WINDOW": "5m", "STATESTORE_GRACE": "30s"})
    assert graced.windowing == WindowSpec(300_000, grace_ms=30_000)
    no_grace = cfg.resolve(StreamConfig, env={**BASE, "STATESTORE_WINDOW": "1m", "STATESTORE_GRACE": "0s"})
    assert no_grace.windowing == WindowSpec(60_000)
    visits = cfg.resolve(StreamConfig, env={**BASE, "STATESTORE_SESSION_GAP": "5m", "STATESTORE_GRACE": "1m"})
    assert visits.windowing == SessionSpec(300_000, grace_ms=60_000)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"STATESTORE_HOP": "10s"}, "--hop only apply to windows: pass --window"),
        ({"STATESTORE_GRACE": "10s", "STATESTORE_RETENTION": "1h"}, "--grace, --retention only apply to windows"),
        ({"STATESTORE_STORE_TYPE": "partitioned-window"}, "counts in windows: pass --window"),
        ({"STATESTORE_WINDOW": "1m", "STATESTORE_STORE_TYPE": "global-kv"}, "not a global-kv store"),
        ({"STATESTORE_WINDOW": "1m", "STATESTORE_HOP": "2m"}, "must be more than 0 and at most the window"),
        ({"STATESTORE_WINDOW": "1m", "STATESTORE_RETENTION": "30s"}, "must be at least window \\+ grace"),
        ({"STATESTORE_WINDOW": "soon"}, "window"),
        ({"STATESTORE_WINDOW": "1m", "STATESTORE_SESSION_GAP": "1m"}, "either --window or --session-gap"),
        ({"STATESTORE_SESSION_GAP": "1m", "STATESTORE_HOP": "10s"}, "--hop only apply to windows"),
        ({"STATESTORE_STORE_TYPE": "partitioned-session"}, "pass --session-gap"),
        ({"STATESTORE_SESSION_GAP": "1m", "STATESTORE_STORE_TYPE": "partitioned-window"}, "not a partitioned-window"),
        ({"STATESTORE_SESSION_GAP": "1m", "STATESTORE_RETENTION": "30s"}, "at least gap \\+ grace"),
    ],
)
def test_the_stream_refuses_inconsistent_window_settings_before_doing_anything(settings, message):
    with pytest.raises(ConfigError, match=message):
        cfg.resolve(StreamConfig, env={**BASE, **settings})


@pytest.mark.parametrize(
    ("windowing", "summary"),
    [
        (WindowSpec(60_000), "1m tumbling windows, grace 0s, retention 1d"),
        (WindowSpec(60_000, 20_000, grace_ms=1_500), "1m hopping windows (hop 20s), grace 1500ms, retention 1d"),
        (SessionSpec(30_000, grace_ms=20_000, retention_ms=7_200_000), "sessions, gap 30s, grace 20s, retention 2h"),
    ],
)
def test_settings_in_words_name_every_setting_exactly(windowing, summary):
    assert windowing.summary() == summary


def test_aggregate_stores_keep_a_row_per_hopping_window():
    env = {**BASE, "STATESTORE_WINDOW": "1m", "STATESTORE_HOP": "20s", "STATESTORE_INPUT_FORMAT": "json"}
    stream = cfg.resolve(
        StreamConfig, env={**env, "STATESTORE_AGGREGATE": "total=sum(amount)", "STATESTORE_KEY": "user"}
    )
    assert stream.windowing == WindowSpec(60_000, 20_000)
    assert not stream.windowing.panes
