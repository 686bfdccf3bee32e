"""Kafka requests over a loopback connection (a fresh one per call, or one kept), encoded and decoded with
our codec: for the APIs no stock client sends (DescribeQuorum, BrokerRegistration, CreateTopics to a
controller listener) and for the errors stock clients never provoke."""

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


class Connection:
    """One kept connection for requests that belong to it (a share session ends when it closes)."""

    def __init__(self, port: int, *, timeout_s: float = 10, host: str = "127.0.0.1") -> None:
        self._socket = socket.create_connection((host, port), timeout=timeout_s)
        self._correlation_id = 0

    def call(self, api_name: str, version: int, body):
        api = API_BY_NAME[api_name]
        self._correlation_id += 1
        self._socket.sendall(encode_request(api.key, version, self._correlation_id, "compat-test", body))
        size = struct.unpack(">i", _receive(self._socket, 4))[0]
        _, response = decode_response(api.key, version, _receive(self._socket, size))
        return response

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
