import pytest
from hypothesis import given
from hypothesis import strategies as st

from statestore.core.partitioner import murmur2, partition_for, partitions_for

# The vectors of Kafka's own UtilsTest.testMurmur2 (org.apache.kafka.common.utils).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_kafka_vectors(data, expected):
    assert murmur2(data) == expected


def test_partition_is_positive_hash_modulo_n():
    for key, hashed in KAFKA_VECTORS.items():
        for n in (1, 3, 4, 7, 64):
            assert partition_for(key, n) == (hashed & 0x7FFFFFFF) % n


def test_partition_of_negative_hash_uses_kafka_to_positive_not_abs():
    # Kafka's toPositive masks the sign bit; abs() would put keys with negative hashes elsewhere.
    key = b"foobar"
    assert partition_for(key, 1000) == (-790332482 & 0x7FFFFFFF) % 1000
    assert partition_for(key, 1000) != abs(-790332482) % 1000


def test_partition_count_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        partition_for(b"x", 0)


# Hashed together: the same partitions as one at a time, for every length the vector path
# handles (whole blocks, each tail length, the longest) and for longer keys mixed in.
@given(st.lists(st.binary(max_size=80), min_size=0, max_size=200), st.sampled_from([1, 3, 4, 7, 64, 1000]))
def test_partitions_for_many_keys_equal_one_at_a_time(keys, n):
    assert partitions_for(keys, n) == [partition_for(key, n) for key in keys]


def test_partitions_for_kafka_vectors_hashed_together():
    keys = list(KAFKA_VECTORS) * 4  # enough keys to take the vector path
    assert partitions_for(keys, 1000) == [(KAFKA_VECTORS[key] & 0x7FFFFFFF) % 1000 for key in keys]


def test_partitions_for_keeps_the_order_of_short_and_long_keys():
    keys = [bytes([i]) * (i * 7 % 150) for i in range(60)]
    assert partitions_for(keys, 13) == [partition_for(key, 13) for key in keys]
    assert len({len(k) > 64 for k in keys}) == 2  # both paths taken


@pytest.mark.parametrize("short", [0, 1, 15, 16])
def test_partitions_for_slices_of_mostly_long_keys(short):
    keys = [bytes([i]) * 100 for i in range(20)] + [bytes([i]) * 9 for i in range(short)]
    assert partitions_for(keys, 7) == [partition_for(key, 7) for key in keys]


def test_partitions_for_refuses_no_partitions():
    with pytest.raises(ValueError, match="at least 1"):
        partitions_for([b"x"] * 20, 0)
