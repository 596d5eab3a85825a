from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import Entry
from statestore.stream.apply import Delta, plan_writes


def _current(**entries):
    return {k.encode(): Entry(k.encode(), encode_long(v), b, t) for k, (v, b, t) in entries.items()}


def test_new_keys_start_from_zero():
    writes, skipped = plan_writes({}, [Delta(b"a", 3, 1000)], batch_id=0)
    assert skipped == 0
    assert [(w.key, decode_long(w.value), w.batch_id, w.time_ms) for w in writes] == [(b"a", 3, 0, 1000)]


def test_existing_keys_add_to_the_stored_value():
    writes, _ = plan_writes(_current(a=(10, 4, 500)), [Delta(b"a", 2, 900)], batch_id=5)
    assert decode_long(writes[0].value) == 12
    assert writes[0].batch_id == 5


def test_keys_already_written_by_this_batch_are_skipped():
    current = _current(a=(12, 5, 900), b=(7, 4, 100))
    writes, skipped = plan_writes(current, [Delta(b"a", 2, 900), Delta(b"b", 1, 950)], batch_id=5)
    assert skipped == 1
    assert [(w.key, decode_long(w.value)) for w in writes] == [(b"b", 8)]


def test_keys_written_by_a_later_batch_are_skipped():
    writes, skipped = plan_writes(_current(a=(12, 9, 900)), [Delta(b"a", 2, 900)], batch_id=5)
    assert (writes, skipped) == ([], 1)


def test_event_time_never_moves_backwards():
    writes, _ = plan_writes(_current(a=(1, 1, 5000)), [Delta(b"a", 1, 4000)], batch_id=2)
    assert writes[0].time_ms == 5000
