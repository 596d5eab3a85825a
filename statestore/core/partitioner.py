"""Kafka's default partitioner, so any reader can compute where a key lives.

A keyed Kafka record goes to `toPositive(murmur2(key)) % numPartitions`
(org.apache.kafka.common.utils.Utils); the store uses the same formula on the key bytes,
so a store's partition of a word equals the partition Kafka would choose for it.

`partitions_for` computes the same for many keys at once, vectorised with numpy: the apply
hashes every key it writes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2: a signed 32-bit hash of `data`."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: bytes, num_partitions: int) -> int:
    """The store (and Kafka) partition of `key` among `num_partitions`."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


# Keys up to this long are hashed together (the work grows with the longest of them); longer
# keys, rare in a word count, one at a time.
_VECTOR_LONGEST = 64
# Fewer keys than this are hashed one at a time: numpy's set-up would cost more.
_VECTOR_FEWEST = 16


def partitions_for(keys: Sequence[bytes], num_partitions: int) -> list[int]:
    """partition_for of every key, in order, hashed together where numpy makes that cheaper."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    if len(keys) < _VECTOR_FEWEST:
        return [partition_for(key, num_partitions) for key in keys]
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    short = np.flatnonzero(lengths <= _VECTOR_LONGEST)
    if len(short) < _VECTOR_FEWEST:  # mostly long keys: nothing worth hashing together
        return [partition_for(key, num_partitions) for key in keys]
    if len(short) == len(keys):
        return _partitions_vector([bytes(key) for key in keys], lengths, num_partitions)
    hashed = _partitions_vector([bytes(keys[i]) for i in short.tolist()], lengths[short], num_partitions)
    partitions = [partition_for(key, num_partitions) if len(key) > _VECTOR_LONGEST else 0 for key in keys]
    for i, partition in zip(short.tolist(), hashed, strict=True):
        partitions[i] = partition
    return partitions


def subpartition_for(key: bytes, num_partitions: int, subpartitions: int) -> int:
    """The sub-partition of `key` within its partition: (hash // partitions) % subpartitions.

    Not hash % subpartitions: with a factor in common with the partition count that would tie
    the two together (4 partitions, 16 sub-partitions: each partition's keys would land in only
    4 of its 16). Dividing first drops the bits the partition used, so keys spread over all
    sub-partitions of every partition."""
    if subpartitions < 1:
        raise ValueError(f"subpartitions must be at least 1, got {subpartitions}")
    return ((murmur2(key) & 0x7FFFFFFF) // num_partitions) % subpartitions


def locations_for(keys: Sequence[bytes], num_partitions: int, subpartitions: int) -> list[tuple[int, int]]:
    """(partition, sub-partition) of every key, in order (partition_for and subpartition_for)."""
    if num_partitions < 1 or subpartitions < 1:
        raise ValueError(f"partitions and subpartitions must be at least 1, got {num_partitions}, {subpartitions}")
    hashes = _positive_hashes(keys)
    return [(h % num_partitions, (h // num_partitions) % subpartitions) for h in hashes]


def _positive_hashes(keys: Sequence[bytes]) -> list[int]:
    """murmur2(key) & 0x7fffffff of every key, vectorised where numpy makes that cheaper."""
    if len(keys) < _VECTOR_FEWEST:
        return [murmur2(key) & 0x7FFFFFFF for key in keys]
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    short = np.flatnonzero(lengths <= _VECTOR_LONGEST)
    hashes = [murmur2(key) & 0x7FFFFFFF if len(key) > _VECTOR_LONGEST else 0 for key in keys]
    if len(short):
        vector = _murmur2_vector([bytes(keys[i]) for i in short.tolist()], lengths[short]) & 0x7FFFFFFF
        for i, h in zip(short.tolist(), vector.tolist(), strict=True):
            hashes[i] = h
    return hashes


def _partitions_vector(keys: list[bytes], lengths: np.ndarray, num_partitions: int) -> list[int]:
    return ((_murmur2_vector(keys, lengths) & 0x7FFFFFFF) % num_partitions).tolist()


def _murmur2_vector(keys: list[bytes], lengths: np.ndarray) -> np.ndarray:
    """murmur2 of each key as unsigned 32-bit hashes: the keys are laid out as rows of
    zero-padded little-endian 32-bit words, and each step of the hash runs over every row."""
    m = np.uint32(_M)
    blocks = lengths // 4
    width = int(blocks.max()) + 1  # every whole block, and the (zero-padded) tail
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)
    starts = np.zeros(len(keys), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    columns = np.arange(width * 4)
    inside = columns[None, :] < lengths[:, None]
    padded = np.zeros((len(keys), width * 4), dtype=np.uint8)
    padded[inside] = data[(starts[:, None] + columns[None, :])[inside]]
    words = padded.view("<u4")
    h = (np.uint32(_SEED) ^ lengths.astype(np.uint32)).astype(np.uint32)
    for j in range(width - 1):
        k = words[:, j] * m
        k ^= k >> np.uint32(24)
        k *= m
        h = np.where(j < blocks, (h * m) ^ k, h)
    # The tail's bytes are the first of the padded word after the whole blocks: xor-ing the
    # word xors exactly them (the padding is zero), as murmur2 does byte by byte.
    tail = words[np.arange(len(keys)), blocks]
    has_tail = (lengths & 3) > 0
    h = np.where(has_tail, (h ^ tail) * m, h)
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h.astype(np.int64)
