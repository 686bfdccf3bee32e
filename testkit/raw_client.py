"""One Kafka request over a fresh loopback connection, encoded and decoded with our codec:
for the APIs no stock client sends (DescribeQuorum, BrokerRegistration, CreateTopics to a
controller listener)."""

from __future__ import annotations

import socket
import struct

from kbroker.wire.frame import decode_response, encode_request
from kbroker.wire.schema import API_BY_NAME


def call(port: int, api_name: str, version: int, body, *, timeout_s: float = 10, host: str = "127.0.0.1"):
    """The response value; OSError if the connection fails or closes."""
    api = API_BY_NAME[api_name]
    with socket.create_connection((host, port), timeout=timeout_s) as connection:
        connection.sendall(encode_request(api.key, version, 1, "compat-test", body))
        size = struct.unpack(">i", _receive(connection, 4))[0]
        _, response = decode_response(api.key, version, _receive(connection, size))
    return response


def request(api_name: str, **fields):
    return API_BY_NAME[api_name].request_class(**fields)


def _receive(connection: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return bytes(data)
