"""A kbroker process with a listener per security protocol, and the certificates and users to reach it.

    PLAINTEXT       admin and inter-broker (no authentication: User:ANONYMOUS)
    SSL             TLS with client certificates required (the principal is the certificate's subject)
    SASL_SSL        SCRAM-SHA-256 and SCRAM-SHA-512, credentials made with AlterUserScramCredentials
    SASL_PLAINTEXT  PLAIN, users from the listener's JAAS config

Certificates come from ``trustme``: a CA, the broker's certificate for
127.0.0.1, a client certificate for alice, and one from another CA that the
broker does not trust.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.broker_process import BrokerProcess, free_port

trustme = pytest.importorskip("trustme", reason="the trustme package (test extra) makes the TLS certificates")

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')


@dataclass
class Certificates:
    ca: str
    broker: str  # certificate chain and private key
    client_cert: str
    client_key: str
    stranger_cert: str  # issued by a CA the broker does not trust
    stranger_key: str


def make_certificates(directory: Path) -> Certificates:
    ca, other_ca = trustme.CA(), trustme.CA()
    paths = {name: str(directory / f"{name}.pem") for name in
             ("ca", "broker", "client_cert", "client_key", "stranger_cert", "stranger_key")}
    ca.cert_pem.write_to_path(paths["ca"])
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(paths["broker"])
    client = ca.issue_cert("alice@example.com", common_name="alice")
    client.cert_chain_pems[0].write_to_path(paths["client_cert"])
    client.private_key_pem.write_to_path(paths["client_key"])
    stranger = other_ca.issue_cert("mallory@example.com", common_name="mallory")
    stranger.cert_chain_pems[0].write_to_path(paths["stranger_cert"])
    stranger.private_key_pem.write_to_path(paths["stranger_key"])
    return Certificates(**paths)


class SecureBroker(BrokerProcess):
    """A broker process listening with all four security protocols; ``extra`` settings on top."""

    def __init__(self, data_dir, certificates: Certificates, *extra: str) -> None:
        self.ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")}
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())
        # The listeners setting replaces the PLAINTEXT-only one BrokerProcess gives first.
        super().__init__(data_dir, self.ports["PLAINTEXT"], f"listeners={listeners}",
                         f"ssl.keystore.location={certificates.broker}",
                         f"ssl.truststore.location={certificates.ca}",
                         "listener.name.ssl.ssl.client.auth=required",
                         "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
                         "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
                         f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}", *extra)
        self.certificates = certificates

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def confluent_config(self, way: str, user: str = "alice", password: str | None = None) -> dict:
        """librdkafka settings to connect ``way``: SSL, SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, or PLAINTEXT."""
        certificates = self.certificates
        password = PASSWORDS.get(user, "x") if password is None else password
        if way == "PLAINTEXT":
            return {"bootstrap.servers": self.address("PLAINTEXT")}
        if way in ("SSL", "SSL-no-certificate", "SSL-untrusted-certificate"):
            config = {"bootstrap.servers": self.address("SSL"), "security.protocol": "SSL",
                      "ssl.ca.location": certificates.ca}
            if way == "SSL":
                config.update({"ssl.certificate.location": certificates.client_cert,
                               "ssl.key.location": certificates.client_key})
            elif way == "SSL-untrusted-certificate":
                config.update({"ssl.certificate.location": certificates.stranger_cert,
                               "ssl.key.location": certificates.stranger_key})
            return config
        listener = "SASL_PLAINTEXT" if way == "PLAIN" else "SASL_SSL"
        config = {"bootstrap.servers": self.address(listener), "security.protocol": listener, "sasl.mechanism": way,
                  "sasl.username": user, "sasl.password": password}
        if listener == "SASL_SSL":
            config["ssl.ca.location"] = certificates.ca
        return config

    def kafka_python_config(self, way: str, user: str = "alice", password: str | None = None) -> dict:
        """kafka-python settings for the same ways."""
        certificates = self.certificates
        password = PASSWORDS.get(user, "x") if password is None else password
        if way in ("SSL", "SSL-no-certificate", "SSL-untrusted-certificate"):
            config = {"bootstrap_servers": self.address("SSL"), "security_protocol": "SSL",
                      "ssl_cafile": certificates.ca}
            if way == "SSL":
                config.update(ssl_certfile=certificates.client_cert, ssl_keyfile=certificates.client_key)
            elif way == "SSL-untrusted-certificate":
                config.update(ssl_certfile=certificates.stranger_cert, ssl_keyfile=certificates.stranger_key)
            return config
        listener = "SASL_PLAINTEXT" if way == "PLAIN" else "SASL_SSL"
        config = {"bootstrap_servers": self.address(listener), "security_protocol": listener, "sasl_mechanism": way,
                  "sasl_plain_username": user, "sasl_plain_password": password}
        if listener == "SASL_SSL":
            config["ssl_cafile"] = certificates.ca
        return config
