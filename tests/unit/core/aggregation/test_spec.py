"""Reading measures, the registry's value format, and the stored value's layout."""

from __future__ import annotations

import pytest

from statestore.core import codecs
from statestore.core.aggregation import AggregateSpec, Measure
from statestore.core.errors import CodecError


def test_the_text_form_round_trips_through_the_registrys_value_format():
    spec = AggregateSpec.parse(" n = count() ,total=sum(amount), last=latest(device.pos)")
    assert spec.text == "n=count(), total=sum(amount), last=latest(device.pos)"
    assert spec.fields == ("amount", "device.pos")
    codec = codecs.codec_named(spec.value_format)
    assert codec.name == spec.value_format
    assert codec.decode(codec.encode({"n": 2, "total": 1.5})) == {"n": 2, "total": 1.5, "last": None}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("n=count(x)", "takes no field"),
        ("t=sum()", "needs the field"),
        ("t=avg(x)", "unknown aggregation 'avg'"),
        ("T=sum(x)", "measure name 'T'"),
        ("a=count(), a=sum(x)", "a repeated"),
        ("t=sum(a-b)", "not a JSON field name"),
        ("total sum(x)", "cannot read measure"),
        ("key=count()", "'key' is a column readers show"),
        ("batch_id=max(x)", "'batch_id' is a column readers show"),
        ("", "at least one measure"),
    ],
)
def test_bad_measures_are_refused_with_what_to_write(text, message):
    with pytest.raises(ValueError, match=message):
        AggregateSpec.parse(text)


def test_a_value_of_another_spec_is_refused():
    spec = AggregateSpec.parse("n=count(), t=sum(x)")
    other = AggregateSpec.parse("n=count()")
    with pytest.raises(CodecError, match="ends before measure t"):
        spec.unpack(other.pack(other.identity()))
    with pytest.raises(CodecError, match="bytes after the last measure"):
        other.unpack(spec.pack(spec.identity()))
    with pytest.raises(CodecError, match="no measure z"):
        spec.codec.encode({"z": 1})


def test_validation_finds_min_above_max_and_negative_counts():
    spec = AggregateSpec.parse("n=count(), lo=min(v), hi=max(v)")
    assert spec.problems((1, 1.0, 2.0)) == []
    assert spec.problems((-1, 3.0, 2.0)) == ["count -1 is negative", "lo 3.0 is above hi 2.0"]


def test_a_measure_is_a_value_object():
    assert Measure("t", "sum", "x") == AggregateSpec.parse("t=sum(x)").measures[0]
    with pytest.raises(CodecError, match="names no valid measures"):
        codecs.codec_named("aggregate:t=nope(x)")
