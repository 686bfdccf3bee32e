"""A small blocking Kafka client over our own codec, for the admin subcommands.

It speaks to any Kafka-compatible broker: each connection asks ApiVersions first and uses, per
API, the newest version both sides know, capped where a newer version changes shape in a way the
commands do not need (topic ids instead of names). Requests go to the broker that must answer
them: partition leaders for Produce, Fetch and ListOffsets, the group's coordinator for group
APIs. Every socket operation has a timeout.
"""

from __future__ import annotations

import socket
import ssl
import struct

from kbroker.security.login import sasl_login
from kbroker.security.scram import AuthenticationFailed
from kbroker.config.client import ClientSecurity
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import decode_response, encode_request
from kbroker.wire.schema import API_BY_NAME

# Newest versions the commands use: beyond these, topics go by id, or groups come in batches.
VERSION_CAPS = {"Metadata": 12, "Produce": 9, "Fetch": 12, "ListOffsets": 7, "CreateTopics": 7, "DeleteTopics": 5,
                "CreatePartitions": 3, "IncrementalAlterConfigs": 1, "DescribeConfigs": 4, "FindCoordinator": 3,
                "ListGroups": 5, "DescribeGroups": 5, "OffsetFetch": 7, "OffsetCommit": 8, "ApiVersions": 3,
                "DescribeQuorum": 1, "DescribeTopicPartitions": 0}
_CLIENT_ID = "kbroker-cli"
LATEST, EARLIEST = -1, -2  # ListOffsets' timestamps for the end and the start of a partition


class KafkaError(Exception):
    """A broker's error code, by Kafka's name."""

    def __init__(self, code: int, where: str = "", message: str | None = None) -> None:
        self.code = code
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error {code}"
        super().__init__(f"{name}{' on ' + where if where else ''}{': ' + message if message else ''}")


def check_error_code(code: int, where: str, message: str | None = None) -> None:
    if code:
        raise KafkaError(code, where, message)


class CommandFailed(Exception):
    """A command's refusal, said in one line as Kafka's tools say it (``Consumer group 'g' does not exist.``)."""


class Connection:
    def __init__(self, host: str, port: int, timeout_s: float, security: ClientSecurity = ClientSecurity()) -> None:
        self.address = f"{host}:{port}"
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.correlation_id = 0
        try:
            if security.ssl_context is not None:
                self.sock = security.ssl_context.wrap_socket(self.sock, server_hostname=host)
            answer = self._call("ApiVersions", 0, API_BY_NAME["ApiVersions"].request_class())
            if answer.error_code:
                raise KafkaError(answer.error_code, f"ApiVersions from {self.address}")
            if security.mechanism is not None:
                self._log_in(security)
        except BaseException:
            self.sock.close()
            raise
        theirs = {api.api_key: (api.min_version, api.max_version) for api in answer.api_keys}
        self.versions = {}
        for name, api in API_BY_NAME.items():
            low, high = theirs.get(api.key, (None, None))
            if low is None:
                continue
            version = min(high, api.max_version, VERSION_CAPS.get(name, api.max_version))
            if version >= max(low, api.min_version):
                self.versions[name] = version

    def _log_in(self, security: ClientSecurity) -> None:
        steps = sasl_login(security.mechanism, security.username, security.password)
        response = None
        while True:  # a handshake and one or two tokens
            try:
                api_name, version, request = steps.send(response)
            except StopIteration:
                return
            except AuthenticationFailed as failure:
                raise ConnectionError(f"{self.address} refused the login of {security.username} with "
                                      f"{security.mechanism}: {failure}") from None
            response = self._call(api_name, version, request)

    def call(self, api_name: str, **fields):
        """Send ``api_name`` with ``fields`` at the negotiated version; the decoded response."""
        return self._call(api_name, self._version(api_name), API_BY_NAME[api_name].request_class(**fields))

    def send(self, api_name: str, **fields) -> None:
        """Send a request that gets no answer (Produce with acks=0)."""
        self._send(api_name, self._version(api_name), API_BY_NAME[api_name].request_class(**fields))

    def _version(self, api_name: str) -> int:
        version = self.versions.get(api_name)
        if version is None:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, self.address, f"the broker does not speak {api_name}")
        return version

    def _send(self, api_name: str, version: int, body) -> None:
        self.correlation_id += 1
        try:
            self.sock.sendall(encode_request(API_BY_NAME[api_name].key, version, self.correlation_id, _CLIENT_ID, body))
        except BrokenPipeError:  # not the commands' stdout closing, which they end on quietly
            raise ConnectionError(f"{self.address} closed the connection") from None

    def _call(self, api_name: str, version: int, body):
        api = API_BY_NAME[api_name]
        self._send(api_name, version, body)
        size = struct.unpack(">i", self._receive(4))[0]
        correlation_id, response = decode_response(api.key, version, self._receive(size))
        if correlation_id != self.correlation_id:
            raise ConnectionError(f"answer {correlation_id} to request {self.correlation_id} from {self.address}")
        return response

    def _receive(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(min(size - len(data), 1 << 20))
            if not chunk:
                if isinstance(self.sock, ssl.SSLSocket):  # TLS 1.3 refuses a client certificate after the handshake
                    raise ConnectionError(f"{self.address} closed the TLS connection: does it require a client "
                                          "certificate (ssl.keystore.location) that it trusts?")
                raise ConnectionError(f"{self.address} closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


class Client:
    def __init__(self, bootstrap: str, timeout_s: float = 15, security: ClientSecurity = ClientSecurity()) -> None:
        self.timeout_s = timeout_s
        self.security = security  # every connection's: TLS and SASL as --command-config says
        self._connections: dict[object, Connection] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self.bootstrap = self._first_reachable(bootstrap)

    def _first_reachable(self, bootstrap: str) -> Connection:
        errors = []
        for address in bootstrap.split(","):
            host, _, port = address.strip().rpartition(":")
            try:
                return self._connect("bootstrap", host or "localhost", int(port))
            except (OSError, ValueError) as error:
                errors.append(f"{address}: {error}")
        raise ConnectionError("no bootstrap server answered: " + "; ".join(errors))

    def _connect(self, key, host: str, port: int) -> Connection:
        if key not in self._connections:
            self._connections[key] = Connection(host, port, self.timeout_s, self.security)
        return self._connections[key]

    def metadata(self, topics: list[str] | None = None, auto_create: bool = False):
        wanted = None if topics is None else [API_BY_NAME["Metadata"].request_class.MetadataRequestTopic(name=name)
                                              for name in topics]
        answer = self.bootstrap.call("Metadata", topics=wanted, allow_auto_topic_creation=auto_create)
        self._brokers = {broker.node_id: (broker.host, broker.port) for broker in answer.brokers}
        return answer

    def broker(self, node_id: int) -> Connection:
        if node_id not in self._brokers:
            self.metadata([])
        if node_id not in self._brokers:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {node_id}")
        return self._connect(node_id, *self._brokers[node_id])

    def leaders(self, topic: str) -> dict[int, int]:
        """Partition -> its leader's node id."""
        answer = self.metadata([topic])
        [found] = answer.topics
        if found.error_code:
            raise KafkaError(found.error_code, topic)
        return {p.partition_index: p.leader_id for p in found.partitions}

    def list_offsets(self, topic: str, timestamp: int) -> dict[int, int]:
        """Partition -> offset at ``timestamp`` (LATEST: the end, EARLIEST: the start), asking each leader."""
        by_leader: dict[int, list[int]] = {}
        for partition, leader in self.leaders(topic).items():
            by_leader.setdefault(leader, []).append(partition)
        Topic = API_BY_NAME["ListOffsets"].request_class.ListOffsetsTopic
        found = {}
        for leader, partitions in by_leader.items():
            answer = self.broker(leader).call("ListOffsets", replica_id=-1, isolation_level=0, topics=[Topic(
                name=topic, partitions=[Topic.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                                        for p in partitions])])
            for result in answer.topics[0].partitions:
                check_error_code(result.error_code, f"{topic}-{result.partition_index}")
                found[result.partition_index] = result.offset
        return found

    def coordinator(self, group: str) -> Connection:
        answer = self.bootstrap.call("FindCoordinator", key=group, key_type=0)
        if answer.error_code:
            raise KafkaError(answer.error_code, f"group {group}", answer.error_message)
        self._brokers[answer.node_id] = (answer.host, answer.port)
        return self._connect(answer.node_id, answer.host, answer.port)

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
