"""The web console's tests' parts: a broker process serving it, a plain HTTP client of it (a cookie jar for
the session, the session's CSRF token read back from the last page, every call over loopback and bounded in
time), and the Kafka clients and commands whose work its pages must show. Import only where confluent-kafka is
installed (the tests skip without it)."""

from __future__ import annotations

import contextlib
import html
import http.cookiejar
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from testkit.broker_process import BrokerProcess, free_port

TIMEOUT_S = 30
_CSRF = re.compile(r'<meta name="csrf" content="([^"]+)">')


class ConsoleClient:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.csrf = ""

    def get(self, path: str) -> tuple[int, str]:
        return self._open(urllib.request.Request(self.base + path))

    def post(self, path: str, fields: dict[str, str], csrf: str | None = None) -> tuple[int, str]:
        """A form as the page sends it, with the token of the last page read (or ``csrf``)."""
        body = urllib.parse.urlencode({"csrf": self.csrf if csrf is None else csrf, **fields}).encode()
        return self._open(urllib.request.Request(self.base + path, data=body, headers={
            "Content-Type": "application/x-www-form-urlencoded"}))

    def _open(self, request) -> tuple[int, str]:
        try:
            with self.opener.open(request, timeout=TIMEOUT_S) as answer:
                status, text = answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        found = _CSRF.search(text)
        if found:
            self.csrf = found.group(1)
        return status, text


_CELL = re.compile(r"<td>(.*?)</td>", re.S)
_ROW = re.compile(r"<tr>(.*?)</tr>", re.S)


class ConsoleBroker(BrokerProcess):
    """A broker process serving the console on a free port."""

    def __init__(self, directory, *overrides: str) -> None:
        self.http_port = free_port()
        super().__init__(directory / "data", None, f"metrics.port={self.http_port}", *overrides)

    def console(self) -> ConsoleClient:
        return ConsoleClient(self.http_port)

    def __enter__(self) -> "ConsoleBroker":
        """Started; killed when the block ends."""
        self.start()
        return self

    def __exit__(self, *exception) -> None:
        self.kill()


def rows(page: str, table_id: str) -> list[list[str]]:
    """The cells of a table of the page, as text."""
    found = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.S)
    assert found, f"no table {table_id}"
    return [[html.unescape(re.sub("<[^>]+>", " ", cell)).strip() for cell in _CELL.findall(row)]
            for row in _ROW.findall(found.group(1)) if "<td>" in row]


def make_topic(broker, partitions: int = 1) -> str:
    name = f"console-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def produce(broker, topic: str, count: int, key=lambda i: f"key-{i % 4}", partition: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(count):
        extra = {} if partition is None else {"partition": partition}
        producer.produce(topic, key=key(i), value=f'{{"n": {i}}}'.encode(),
                         headers=[("origin", b"test"), ("n", str(i).encode())], **extra)
    assert producer.flush(30) == 0


def consume_and_commit(broker, topic: str, group: str, count: int) -> None:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    read, deadline = 0, time.monotonic() + 30
    while read < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            read += 1
    consumer.commit(asynchronous=False)  # every partition's position
    consumer.close()
    assert read == count


def kbroker(*arguments: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kbroker.cli", *arguments], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def described_rows(broker, group: str) -> list[list[str]]:
    """`kbroker groups describe`'s rows: GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ..."""
    lines = kbroker("groups", "describe", group, "--bootstrap-server", broker.bootstrap).strip().splitlines()
    return [line.split() for line in lines[1:]]


USERS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{user}="{password}"' for user, password in USERS.items()) + ";")


def secured_broker(directory) -> "ConsoleBroker":
    """SASL_PLAINTEXT with PLAIN users, the ACL authorizer, admin a super user (and the plaintext
    inter-broker listener's ANONYMOUS)."""
    sasl, internal = free_port(), free_port()
    process = ConsoleBroker(
        directory,
        f"listeners=INTERNAL://127.0.0.1:{internal},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin;User:ANONYMOUS", "sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}")
    process.port = internal
    return process


def signed_in(broker, user: str) -> ConsoleClient:
    console = broker.console()
    status, page = console.get("/")
    assert status == 200 and 'id="login"' in page  # sent to the sign-in page
    status, page = console.post("/login", {"username": user, "password": USERS[user]})
    assert status == 200 and f'<span class="who" id="principal">User:{user}</span>' in page
    return console


# An Avro value schema and a compatible next version of it (a field with a default added).
ORDER_V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},
                                                          {"name": "item", "type": "string"}]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "note", "type": "string", "default": ""}]}


@contextlib.contextmanager
def registry_broker(directory):
    """A console broker serving the schema registry, a topic, its value subject registered at ORDER_V1, and a
    serializer of ORDER_V2 values for it (which registers version 2): (broker, topic, serialize)."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry_port = free_port()
    with ConsoleBroker(directory, f"schema.registry.listeners=http://127.0.0.1:{registry_port}") as broker:
        topic = make_topic(broker)
        registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{registry_port}"})
        registry.register_schema(f"{topic}-value", Schema(json.dumps(ORDER_V1), "AVRO"))
        serializer = AvroSerializer(registry, json.dumps(ORDER_V2))
        yield broker, topic, lambda value: serializer(value, SerializationContext(topic, MessageField.VALUE))

