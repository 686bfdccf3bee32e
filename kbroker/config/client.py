"""How the admin commands connect: ``--command-config FILE``, a client properties file as Kafka's
shell tools take it, naming the security protocol and what it needs. Both the Java client's names
and librdkafka's are understood:

    security.protocol               PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    ssl.truststore.location         PEM file of the CAs to trust (ssl.ca.location); else the system's
    ssl.truststore.certificates     the same, inline PEM
    ssl.keystore.location           PEM file with a client certificate chain and its key
    ssl.certificate.location        ... or the chain and the key apart (ssl.key.location)
    ssl.key.password                password of the key (ssl.keystore.password)
    ssl.endpoint.identification.algorithm   https (default: check the host name) or empty / none
    sasl.mechanism                  PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl.jaas.config                ... required username="..." password="...";
    sasl.username, sasl.password    the same, librdkafka's way

Other client settings (client.id, timeouts, ...) are ignored with a warning, as Kafka's tools warn.
"""

from __future__ import annotations

import ssl
import sys
from dataclasses import dataclass

from kbroker.config import ConfigError
from kbroker.config.broker_config import SECURITY_PROTOCOLS
from kbroker.config.sources import file_originals
from kbroker.security.listener import jaas_login

_KNOWN = {"security.protocol", "ssl.truststore.location", "ssl.ca.location", "ssl.truststore.certificates",
          "ssl.keystore.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
          "ssl.keystore.password", "ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.jaas.config",
          "sasl.username", "sasl.password", "ssl.truststore.type", "ssl.keystore.type"}


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    @classmethod
    def from_properties(cls, path: str | None, warn=lambda text: print(text, file=sys.stderr)) -> ClientSecurity:
        if path is None:
            return cls()
        settings = {original.name: original.text for original in file_originals(path)}
        for name in sorted(set(settings) - _KNOWN):
            warn(f"kbroker: {path}: {name} is not used by the admin commands")
        protocol = settings.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"{path}: security.protocol={protocol} is not one of {', '.join(SECURITY_PROTOCOLS)}",
                              "security.protocol")
        context = _ssl_context(path, settings) if protocol in ("SSL", "SASL_SSL") else None
        if not protocol.startswith("SASL_"):
            return cls(protocol, context)
        mechanism = settings.get("sasl.mechanism", "GSSAPI").upper()
        login = jaas_login(settings.get("sasl.jaas.config", ""))
        username = settings.get("sasl.username", login.get("username", ""))
        password = settings.get("sasl.password", login.get("password"))
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ConfigError(f"{path}: sasl.mechanism={mechanism}: the admin commands log in with PLAIN, "
                              "SCRAM-SHA-256 or SCRAM-SHA-512", "sasl.mechanism")
        if not username or password is None:
            raise ConfigError(f"{path}: {protocol} needs a user and a password: sasl.jaas.config with "
                              "username=\"...\" password=\"...\" (or sasl.username and sasl.password)",
                              "sasl.jaas.config")
        return cls(protocol, context, mechanism, username, password)


def _ssl_context(path: str, settings: dict[str, str]) -> ssl.SSLContext:
    password = settings.get("ssl.key.password") or settings.get("ssl.keystore.password")
    try:
        context = ssl.create_default_context(
            cafile=settings.get("ssl.truststore.location") or settings.get("ssl.ca.location"),
            cadata=settings.get("ssl.truststore.certificates"))
        if settings.get("ssl.keystore.location"):
            context.load_cert_chain(settings["ssl.keystore.location"], password=password)
        elif settings.get("ssl.certificate.location"):
            context.load_cert_chain(settings["ssl.certificate.location"], settings.get("ssl.key.location"),
                                    password=password)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"{path}: cannot load the trust store or the client certificate: {error}",
                          "ssl.truststore.location") from None
    algorithm = settings.get("ssl.endpoint.identification.algorithm", "https").lower()
    context.check_hostname = algorithm == "https"
    return context
