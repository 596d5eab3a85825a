"""Expiry's rule against a stream time in the future (issue 28, item 3). Pure."""

from __future__ import annotations

import pytest

from statestore.core.errors import FutureStreamTimeError
from statestore.core.model import StoreSpec, StoreType
from statestore.maintenance.expire.segments import refuse_future_cutoff

SPEC = StoreSpec("ks", "words", StoreType.PARTITIONED_KV, 4)
NOW = 1_800_000_000_000


def test_a_cutoff_up_to_the_wall_clock_passes():
    refuse_future_cutoff(SPEC, NOW - 1, NOW + 86_400_000 - 1, NOW)
    refuse_future_cutoff(SPEC, NOW, NOW + 86_400_000, NOW)


def test_a_cutoff_after_the_wall_clock_is_refused_naming_the_store_the_stream_time_and_the_way_out():
    with pytest.raises(FutureStreamTimeError) as caught:
        refuse_future_cutoff(SPEC, NOW + 1, NOW + 86_400_001, NOW)
    message = str(caught.value)
    assert "'words'" in message and str(NOW + 86_400_001) in message and "in the future" in message
    assert "--basis processing" in message and "nothing was deleted" in message
