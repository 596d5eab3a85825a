"""A window store's description: its windowing is part of its layout, required for window
types and refused for the others; the stream refuses window types until it writes them."""

import pytest

from statestore.core import config as cfg
from statestore.core.config import StreamConfig
from statestore.core.errors import ConfigError, OptionError
from statestore.core.model import StoreSpec, StoreType
from statestore.core.windows import WindowSpec

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


def test_the_stream_refuses_a_window_store_type_before_doing_anything():
    with pytest.raises(ConfigError, match="does not write partitioned-window stores yet"):
        cfg.resolve(StreamConfig, env={"STATESTORE_STORE_TYPE": "partitioned-window"})
