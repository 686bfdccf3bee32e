"""The Kafka binary protocol: pure encoding and decoding, no I/O."""

from kbroker.wire.primitives import DecodeError

__all__ = ["DecodeError"]
