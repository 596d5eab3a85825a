"""Kafka's default partitioner, so any reader can compute where a key lives.

A keyed Kafka record goes to `toPositive(murmur2(key)) % numPartitions`
(org.apache.kafka.common.utils.Utils); the store uses the same formula on the key bytes,
so a store's partition of a word equals the partition Kafka would choose for it.
"""

from __future__ import annotations

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
