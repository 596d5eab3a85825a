"""Keys typed as text and values shown as text or JSON (statestore.present.text), for CLI and HTTP alike."""

from __future__ import annotations

import io
import json

import pytest

from statestore.core import codecs
from statestore.core.errors import CodecError
from statestore.present.text import emit, parse_key, to_json, to_text


@pytest.mark.parametrize(
    "codec, text, key",
    [
        (codecs.STRING, "héllo wörld/1", "héllo wörld/1"),
        (codecs.STRING, "42", "42"),
        (codecs.LONG, "-9223372036854775808", -(2**63)),
        (codecs.LONG, " 17 ", 17),
        (codecs.INT, "2147483647", 2**31 - 1),
        (codecs.JSON, '{"id": 1, "tags": ["a"]}', {"id": 1, "tags": ["a"]}),
        (codecs.JSON, '"word"', "word"),
        (codecs.BYTES, "00ff10", b"\x00\xff\x10"),
    ],
)
def test_keys_parse_with_their_codec_and_round_trip(codec, text, key):
    parsed = parse_key(text, codec)
    assert parsed == key
    assert codec.decode(codec.encode(parsed)) == key


@pytest.mark.parametrize(
    "codec, text, expected",
    [
        (codecs.LONG, "abc", "not a long key: write a decimal integer"),
        (codecs.LONG, "9223372036854775808", "does not fit a signed 64-bit long"),
        (codecs.INT, "2147483648", "does not fit a signed 32-bit int"),
        (codecs.INT, "1.5", "not a int key"),
        (codecs.JSON, "{oops", "not a json key: write JSON text"),
        (codecs.BYTES, "0g", "not a bytes key: write hex digits"),
        (codecs.JSON, "[" * 5_000 + "]" * 5_000, "nested deeper than"),  # RecursionError, once a 500
        (codecs.JSON, "[" * 200 + "]" * 200, "nested deeper than"),  # parses, and is still too deep
    ],
)
def test_bad_keys_name_the_expected_syntax(codec, text, expected):
    with pytest.raises(CodecError, match=expected):
        parse_key(text, codec)


def test_values_render_as_text_and_json():
    assert [to_text(v) for v in ("a b", 5, b"\x01\xff", {"b": 1, "a": [True, None]})] == [
        "a b",
        "5",
        "01ff",
        '{"a":[true,null],"b":1}',
    ]
    assert [to_json(v) for v in ("a", 5, b"\x01", {"k": 1})] == ["a", 5, "01", {"k": 1}]


def test_emit_formats():
    rows = [("é", 1, None), ("b,c", {"x": 2}, b"\x00")]
    header = ("key", "value", "extra")
    out = io.StringIO()
    assert emit(rows, header, "csv", out) == 2
    assert out.getvalue() == 'key,value,extra\né,1,\n"b,c","{""x"":2}",00\n'
    out = io.StringIO()
    emit(rows, header, "jsonl", out)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [
        {"key": "é", "value": 1, "extra": None},
        {"key": "b,c", "value": {"x": 2}, "extra": "00"},
    ]
    out = io.StringIO()
    emit(rows, header, "table", out)
    assert out.getvalue().splitlines() == ["key  value    extra", "é    1", 'b,c  {"x":2}  00']


def test_the_table_streams_past_the_rows_that_set_its_widths():
    rows = ((f"k{i}", "v" * (i // 500)) for i in range(3000))
    out = io.StringIO()
    assert emit(rows, ("key", "value"), "table", out) == 3000
    lines = out.getvalue().splitlines()
    assert len(lines) == 3001 and lines[-1] == "k2999  " + "v" * 5
