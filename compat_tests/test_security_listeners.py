"""Stock clients over TLS and SASL (issue 11, point 1): confluent-kafka and kafka-python produce and
consume over SSL with client certificates, SASL_SSL with SCRAM-SHA-256 and SCRAM-SHA-512, and
SASL_PLAINTEXT with PLAIN; a wrong password, an unknown user, a missing or untrusted client
certificate cannot produce, consume or list topics. With ssl.client.auth=requested a certificate
names the client and none is needed. kbroker's own admin commands connect each way too, from a
--command-config file."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from testkit.secure_broker import PASSWORDS, SecureBroker, make_certificates

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,  # noqa: E402
                                   UserScramCredentialUpsertion)

WAYS = ["SSL", "SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
REFUSED = [("SSL-no-certificate", "alice", None), ("SSL-untrusted-certificate", "alice", None),
           ("SCRAM-SHA-256", "alice", "wrong"), ("SCRAM-SHA-512", "nobody", "x"), ("PLAIN", "alice", "wrong"),
           ("PLAIN", "nobody", "x")]
MESSAGES = 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    directory = tmp_path_factory.mktemp("secure")
    process = SecureBroker(directory / "data", make_certificates(directory))
    process.start()
    try:
        admin = AdminClient(process.confluent_config("PLAINTEXT"))
        # One request per mechanism: a user altered twice in one request is refused (DUPLICATE_RESOURCE), as
        # Kafka 4.4's controller refuses it (compat_tests/differential_security_sessions.py).
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
                       for user, password in PASSWORDS.items()]
            for future in admin.alter_user_scram_credentials(upserts).values():
                future.result(timeout=30)
        yield process
    finally:
        process.kill()


def _topic(broker) -> str:
    name = f"secure-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(broker.confluent_config("PLAINTEXT"))
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
    return name


@pytest.mark.parametrize("way", WAYS)
def test_confluent_kafka_produces_and_consumes(broker, way):
    topic = _topic(broker)
    producer = Producer({**broker.confluent_config(way), "acks": "all"})
    for index in range(MESSAGES):
        producer.produce(topic, f"{way}-{index}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**broker.confluent_config(way), "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        for _ in range(200):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
            if len(values) == MESSAGES:
                break
    finally:
        consumer.close()
    assert values == [f"{way}-{index}" for index in range(MESSAGES)]


@pytest.mark.parametrize("way", WAYS)
def test_kafka_python_produces_and_consumes(broker, way):
    topic = _topic(broker)
    producer = kafka.KafkaProducer(**broker.kafka_python_config(way), acks="all")
    for index in range(MESSAGES):
        producer.send(topic, f"{way}-{index}".encode())
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, **broker.kafka_python_config(way), group_id=f"g-{topic}",
                                   auto_offset_reset="earliest", consumer_timeout_ms=15000)
    try:
        values = [message.value.decode() for _, message in zip(range(MESSAGES), consumer)]
    finally:
        consumer.close()
    assert values == [f"{way}-{index}" for index in range(MESSAGES)]


@pytest.mark.slow
@pytest.mark.parametrize("way, user, password", REFUSED, ids=[f"{w}-{u}-{p}" for w, u, p in REFUSED])
def test_confluent_kafka_is_refused(broker, way, user, password):
    topic = _topic(broker)
    config = broker.confluent_config(way, user, password)
    with pytest.raises(KafkaException):
        AdminClient(config).list_topics(timeout=3)
    producer = Producer({**config, "message.timeout.ms": 2000})
    delivered = []
    producer.produce(topic, b"x", on_delivery=lambda error, _message: delivered.append(error))
    producer.flush(10)
    assert delivered and delivered[0] is not None  # not acknowledged
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        got = [consumer.poll(0.5) for _ in range(4)]
    finally:
        consumer.close()
    assert not [m for m in got if m is not None and m.error() is None]
    assert _end_offset(broker, topic) == 0  # nothing was written


@pytest.mark.slow
@pytest.mark.parametrize("way, user, password", REFUSED, ids=[f"{w}-{u}-{p}" for w, u, p in REFUSED])
def test_kafka_python_is_refused(broker, way, user, password):
    config = broker.kafka_python_config(way, user, password)
    with pytest.raises(kafka.errors.KafkaError):
        consumer = kafka.KafkaConsumer(**config, request_timeout_ms=3000, bootstrap_timeout_ms=3000)
        try:
            consumer.topics()
        finally:
            consumer.close()
    with pytest.raises(kafka.errors.KafkaError):
        producer = kafka.KafkaProducer(**config, max_block_ms=3000, request_timeout_ms=3000, bootstrap_timeout_ms=3000)
        try:
            producer.send("anything", b"x").get(timeout=3)
        finally:
            producer.close(0)


def _end_offset(broker, topic: str) -> int:
    consumer = Consumer({**broker.confluent_config("PLAINTEXT"), "group.id": "probe"})
    try:
        _, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return high


def _admin_command(broker, tmp_path, settings: dict, *command: str) -> subprocess.CompletedProcess:
    """``kbroker`` admin ``command`` with ``settings`` (bootstrap.servers aside) in its --command-config file."""
    properties = tmp_path / "client.properties"
    properties.write_text("".join(f"{name}={value}\n" for name, value in settings.items()
                                  if name != "bootstrap.servers"))
    return subprocess.run([sys.executable, "-m", "kbroker.cli", *command, "--bootstrap-server",
                           settings["bootstrap.servers"], "--command-config", str(properties)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("way", WAYS)
def test_the_admin_commands_connect_as_the_command_config_says(broker, tmp_path, way):
    topic = _topic(broker)
    listed = _admin_command(broker, tmp_path, broker.confluent_config(way), "topics", "list")
    assert listed.returncode == 0 and topic in listed.stdout.split(), listed.stderr
    produced = _admin_command(broker, tmp_path, broker.confluent_config(way), "produce", topic)
    assert produced.returncode == 0, produced.stderr  # nothing on stdin: nothing produced, but logged in


def test_the_admin_commands_take_the_java_clients_names(broker, tmp_path):
    settings = {"bootstrap.servers": broker.address("SASL_SSL"), "security.protocol": "SASL_SSL",
                "ssl.truststore.location": broker.certificates.ca, "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                    'username="alice" password="alice-secret";', "client.id": "ignored"}
    listed = _admin_command(broker, tmp_path, settings, "cluster", "status")
    assert listed.returncode == 0 and "client.id is not used" in listed.stderr, listed.stderr


@pytest.mark.parametrize("way, user, password", REFUSED, ids=[f"{w}-{u}-{p}" for w, u, p in REFUSED])
def test_the_admin_commands_are_refused_with_a_clear_error(broker, tmp_path, way, user, password):
    refused = _admin_command(broker, tmp_path, broker.confluent_config(way, user, password), "topics", "list")
    assert refused.returncode == 1 and refused.stderr.startswith("kbroker: "), refused.stderr
    if not way.startswith("SSL"):
        assert "SASL_AUTHENTICATION_FAILED" in refused.stderr, refused.stderr


def test_a_command_config_it_cannot_use_is_refused_naming_the_setting(broker, tmp_path):
    for settings, named in [({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
                            ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
                            ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent.pem"},
                             "trust store"),
                            ({"security.protocol": "TLS"}, "security.protocol")]:
        refused = _admin_command(broker, tmp_path, {"bootstrap.servers": broker.address("SSL"), **settings},
                                 "topics", "list")
        assert refused.returncode == 2 and named in refused.stderr, refused.stderr


@pytest.mark.slow
def test_a_requested_client_certificate_names_the_client_when_given_and_is_not_needed(tmp_path):
    """ssl.client.auth=requested: a client without a certificate is served as User:ANONYMOUS, one with a
    certificate the broker trusts as the certificate's subject; a certificate from a CA the broker does
    not trust is refused all the same (the request log names each principal)."""
    from cryptography import x509

    from testkit.broker_process import BrokerProcess, free_port

    certificates = make_certificates(tmp_path)
    ssl_port = free_port()
    process = BrokerProcess(tmp_path / "data", None, f"listeners=SSL://127.0.0.1:{ssl_port}",
                            "inter.broker.listener.name=SSL",
                            f"ssl.keystore.location={certificates.broker}",
                            f"ssl.truststore.location={certificates.ca}", "ssl.client.auth=requested",
                            "logging.requests=true")
    process.start()
    try:
        tls = {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
               "ssl.ca.location": certificates.ca, "message.timeout.ms": 5000}

        def produce(**certificate) -> bool:
            producer = Producer({**tls, **certificate})
            outcome = []
            producer.produce("requested", b"v", on_delivery=lambda error, _message: outcome.append(error))
            producer.flush(15)
            return len(outcome) == 1 and outcome[0] is None  # (a KafkaError cannot be compared with None)

        assert produce()  # topics are created on first use here
        assert produce(**{"ssl.certificate.location": certificates.client_cert,
                          "ssl.key.location": certificates.client_key})
        assert not produce(**{"ssl.certificate.location": certificates.stranger_cert,
                              "ssl.key.location": certificates.stranger_key})
        with open(certificates.client_cert, "rb") as file:
            subject = x509.load_pem_x509_certificate(file.read()).subject.rfc4514_string()
        principals = {line.split("(", 1)[1].split(")", 1)[0] for line in process.log_tail
                      if "Produce v" in line and "(" in line}
        assert principals == {"User:ANONYMOUS", f"User:{subject}"}, principals
    finally:
        process.kill()
