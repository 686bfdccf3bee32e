"""The murmur2 hash exactly as Kafka's Java client computes it.

Clients pick a keyed record's partition as ``to_positive(murmur2(key)) %
partitions``; anything on our side that must agree with them (a test that
predicts placement, a coordinator lookup by key) has to hash identically,
including Java's signed 32-bit arithmetic and its seed.
"""

from __future__ import annotations

import struct

__all__ = ["murmur2", "to_positive", "default_partition"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit int, as Java returns it."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length // 4
    # Java reads each 4-byte group little-endian.
    for k in struct.unpack_from(f"<{whole}I", data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = whole * 4
    remaining = length - tail
    if remaining:
        if remaining == 3:
            h ^= data[tail + 2] << 16
        if remaining >= 2:
            h ^= data[tail + 1] << 8
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clears the sign bit, which is not ``abs`` for negatives."""
    return number & 0x7FFFFFFF


def default_partition(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner chooses for a non-null ``key``."""
    return to_positive(murmur2(key)) % num_partitions
