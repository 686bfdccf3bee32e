"""kbroker: a Kafka-wire-compatible message broker on trio."""

__version__ = "0.1.0"
