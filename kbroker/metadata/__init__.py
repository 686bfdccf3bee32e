"""Cluster metadata: the immutable image brokers answer from."""
