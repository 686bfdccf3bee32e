"""What a listener's security protocol asks of its connections: TLS, SASL, or neither.

Built once per listener from the broker's settings under Kafka's names, each
``ssl.*`` and ``sasl.*`` setting taken in its ``listener.name.<l>.`` form when
one is given. TLS reads PEM only (``ssl.keystore.type=PEM``): a key store file
holding the certificate chain and the private key, or the two inline, and a
trust store of CA certificates for client certificates.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field

from kbroker.config import BrokerConfig, ConfigError

ANONYMOUS = "User:ANONYMOUS"
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# user_<name>="<password>" options of PLAIN's JAAS login module, as in Kafka's PlainLoginModule config.
_JAAS_USER = re.compile(r'user_([^=\s]+)\s*=\s*"((?:[^"\\]|\\.)*)"')
# username="..." and password="..." options: the credentials this broker logs in with to other nodes.
_JAAS_LOGIN = re.compile(r'(?<![\w.])(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True)
class ListenerSecurity:
    name: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    client_auth: str = "none"
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict)
    max_receive_bytes: int = 512 * 1024  # sasl.server.max.receive.size: the frame limit until authenticated
    reauth_ms: int = 0  # connections.max.reauth.ms

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_config(cls, config: BrokerConfig, name: str, protocol: str) -> ListenerSecurity:
        def setting(key):
            return config.for_listener(name, key)
        uses_tls, uses_sasl = protocol in ("SSL", "SASL_SSL"), protocol.startswith("SASL_")
        mechanisms = tuple(setting("sasl.enabled.mechanisms")) if uses_sasl else ()
        if uses_sasl and not set(mechanisms) & set(SUPPORTED_MECHANISMS):
            raise _error(config, "sasl.enabled.mechanisms",
                         f"listener {name} ({protocol}) offers {', '.join(mechanisms) or 'no mechanism'}; kbroker "
                         f"supports {', '.join(SUPPORTED_MECHANISMS)}")
        plain_users = {}
        if "PLAIN" in mechanisms:
            jaas = setting("plain.sasl.jaas.config") or setting("sasl.jaas.config")
            if jaas is None:
                raise _error(config, "sasl.jaas.config", f"listener {name} offers PLAIN: set listener.name."
                             f"{name.lower()}.plain.sasl.jaas.config with its user_<name>=\"<password>\" entries")
            plain_users = plain_users_from_jaas(jaas)
        return cls(name, protocol,
                   ssl_context=server_ssl_context(config, name) if uses_tls else None,
                   client_auth=setting("ssl.client.auth") if uses_tls else "none",
                   mechanisms=tuple(m for m in mechanisms if m in SUPPORTED_MECHANISMS),
                   plain_users=plain_users,
                   max_receive_bytes=setting("sasl.server.max.receive.size"),
                   reauth_ms=setting("connections.max.reauth.ms") if uses_sasl else 0)


def plain_users_from_jaas(text: str) -> dict[str, str]:
    """PLAIN's users from a JAAS login module line: ``... required user_alice="secret";``."""
    return {user: re.sub(r"\\(.)", r"\1", password) for user, password in _JAAS_USER.findall(text)}


def jaas_login(text: str) -> dict[str, str]:
    """The ``username`` and ``password`` options of a JAAS login module line (those that are given)."""
    return {option: re.sub(r"\\(.)", r"\1", value) for option, value in _JAAS_LOGIN.findall(text)}


def server_ssl_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS server context of ``listener`` from its ``ssl.*`` settings (PEM)."""
    context = _tls_context(config, listener, ssl.PROTOCOL_TLS_SERVER)
    client_auth = config.for_listener(listener, "ssl.client.auth")
    with _loading(config, listener):
        if not _load_keystore(context, config, listener):
            raise _error(config, "ssl.keystore.location", f"listener {listener} uses TLS: set "
                         "ssl.keystore.location (a PEM file with the certificate chain and the private key), or "
                         "ssl.keystore.certificate.chain and ssl.keystore.key")
        if not _load_truststore(context, config, listener) and client_auth != "none":
            raise _error(config, "ssl.truststore.location", f"ssl.client.auth={client_auth} on "
                         f"listener {listener} needs the CAs of client certificates: set ssl.truststore.location")
    context.verify_mode = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
                           "none": ssl.CERT_NONE}[client_auth]
    return context


def client_ssl_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context this node connects to ``listener`` of other nodes with, as Kafka's brokers do:
    the listener's own key store is its client certificate, its trust store (else the system's CAs)
    checks theirs, and ``ssl.endpoint.identification.algorithm=https`` checks their host names."""
    context = _tls_context(config, listener, ssl.PROTOCOL_TLS_CLIENT)
    with _loading(config, listener):
        _load_keystore(context, config, listener)
        if not _load_truststore(context, config, listener):
            context.load_default_certs()
    algorithm = config.for_listener(listener, "ssl.endpoint.identification.algorithm") or ""
    context.check_hostname = algorithm.lower() == "https"
    return context


def _tls_context(config: BrokerConfig, listener: str, protocol: int) -> ssl.SSLContext:
    context = ssl.SSLContext(protocol)
    versions = [_TLS_VERSIONS[v] for v in config.for_listener(listener, "ssl.enabled.protocols")]
    context.minimum_version, context.maximum_version = min(versions), max(versions)
    if config.for_listener(listener, "ssl.cipher.suites"):
        context.set_ciphers(":".join(config.for_listener(listener, "ssl.cipher.suites")))
    return context


def _load_keystore(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> bool:
    """Load the listener's certificate chain and private key, if it has them."""
    def setting(key):
        return config.for_listener(listener, key)
    password = setting("ssl.key.password") or setting("ssl.keystore.password")
    location, chain, key = (setting("ssl.keystore.location"), setting("ssl.keystore.certificate.chain"),
                            setting("ssl.keystore.key"))
    if location:
        context.load_cert_chain(location, password=password)
    elif chain and key:
        _load_inline_cert_chain(context, chain, key, password)
    else:
        return False
    return True


def _load_truststore(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> bool:
    """Trust the listener's CA certificates, if it names any."""
    location = config.for_listener(listener, "ssl.truststore.location")
    certificates = config.for_listener(listener, "ssl.truststore.certificates")
    if not (location or certificates):
        return False
    context.load_verify_locations(cafile=location or None, cadata=certificates or None)
    return True


@contextmanager
def _loading(config: BrokerConfig, listener: str):
    """Key or trust material that cannot be read stops the broker at start, naming the setting."""
    try:
        yield
    except (OSError, ssl.SSLError) as error:
        raise _error(config, "ssl.keystore.location", f"listener {listener}: cannot load its TLS "
                     f"key store or trust store: {error}") from None


def _load_inline_cert_chain(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    # The ssl module loads key material from files only: a private temporary file, removed at once.
    descriptor, path = tempfile.mkstemp(prefix="kbroker-keystore-", suffix=".pem")
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(chain.strip() + "\n" + key.strip() + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


# Attribute short names in an RFC 2253 distinguished name, as Java's X500Principal.getName() writes them.
_DN_KEYWORDS = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
                "localityName": "L", "stateOrProvinceName": "ST", "streetAddress": "STREET",
                "domainComponent": "DC", "userId": "UID"}


def principal_of_certificate(certificate: dict | None) -> str:
    """Kafka's DEFAULT ``ssl.principal.mapping.rules``: ``User:`` and the subject's distinguished name in
    RFC 2253 form (most specific first: ``User:CN=alice,O=example``); ANONYMOUS without a certificate."""
    if not certificate or not certificate.get("subject"):
        return ANONYMOUS
    parts = []
    for rdn in reversed(certificate["subject"]):
        parts.append("+".join(f"{_DN_KEYWORDS.get(kind, kind)}={_escape_dn(value)}" for kind, value in rdn))
    return "User:" + ",".join(parts)


def _escape_dn(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    return escaped[:-1] + "\\ " if escaped.endswith(" ") else escaped


def _error(config: BrokerConfig, name: str, message: str) -> ConfigError:
    return ConfigError(message, name, None, config.source(name))
