import pytest

from statestore.core.codecs import JSON, LONG, decode_long, decode_stored, decode_text, encode_long, encode_text
from statestore.core.errors import CodecError, StoredDataError


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, "0000000000000000"),
        (1, "0000000000000001"),
        (-1, "ffffffffffffffff"),
        (256, "0000000000000100"),
        (2**63 - 1, "7fffffffffffffff"),
        (-(2**63), "8000000000000000"),
    ],
)
def test_long_is_kafka_longserializer_big_endian(value, wire):
    assert encode_long(value).hex() == wire
    assert decode_long(bytes.fromhex(wire)) == value


def test_long_out_of_range_is_rejected():
    with pytest.raises(CodecError, match="64-bit"):
        encode_long(2**63)


def test_long_of_wrong_length_names_the_bytes():
    with pytest.raises(CodecError, match="8 bytes, got 3"):
        decode_long(b"\x00\x01\x02")


def test_text_round_trip_and_invalid_utf8():
    assert decode_text(encode_text("école 河")) == "école 河"
    with pytest.raises(CodecError, match="not valid UTF-8"):
        decode_text(b"\xff\xfe")


def test_stored_bytes_that_do_not_decode_are_the_datas_fault_not_the_callers():
    with pytest.raises(StoredDataError, match="store 'words' holds a value that its long codec cannot decode") as info:
        decode_stored(LONG, b"\x01\x02\x03", "words")
    assert "8 bytes, got 3" in str(info.value) and not isinstance(info.value, CodecError)
    with pytest.raises(StoredDataError, match="holds a key that its json codec"):
        decode_stored(JSON, b"{", "events", "key")
    assert decode_stored(LONG, LONG.encode(-7), "words") == -7
