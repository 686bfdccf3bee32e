import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kbroker.wire.murmur2 import default_partition, murmur2, to_positive

# Kafka's own expectations for Utils.murmur2 (UtilsTest.testMurmur2).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key,expected", JAVA_VECTORS.items())
def test_java_vectors(key, expected):
    assert murmur2(key) == expected


def test_every_tail_length_and_empty_input():
    # Lengths 0-3 mod 4 take different tail branches.
    for length in range(13):
        key = bytes(range(200, 200 + length))
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)
    assert murmur2(b"") == 275646681


@given(key=st.binary(max_size=300))
@settings(max_examples=2000)
def test_matches_kafka_python(key):
    # kafka-python returns the unsigned 32-bit pattern, Java the signed int.
    ours = murmur2(key)
    assert -(2**31) <= ours < 2**31
    assert ours & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_accepts_any_bytes_like():
    key = b"some-key-123"
    assert murmur2(bytearray(key)) == murmur2(memoryview(key)) == murmur2(key)


def test_to_positive_clears_the_sign_bit():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # Java's abs would overflow here
    assert to_positive(5) == 5


@given(key=st.binary(max_size=64), partitions=st.integers(1, 1000))
def test_default_partition_as_the_java_producer(key, partitions):
    expected = (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions
    assert default_partition(key, partitions) == expected


def test_default_partition_known_values():
    # (-973932308 & 0x7fffffff) = 1173551340
    assert default_partition(b"21", 10) == 1173551340 % 10 == 0
    assert default_partition(b"abc", 7) == 479470107 % 7
