"""SASL mechanisms on the server side: SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and PLAIN (RFC 4616).

Sans-IO: each exchange takes the client's tokens and returns the server's,
raising :class:`AuthenticationFailed` with the message the broker sends back.
The broker keeps only what SCRAM's server needs (salt, StoredKey, ServerKey,
iterations), never a password: a credential is made from the salted password
AlterUserScramCredentials carries. An unknown user goes through the whole
exchange against a made-up credential and fails where a wrong password
fails, so that a client cannot tell the two apart.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Callable

MAX_TOKEN_BYTES = 64 * 1024  # no SCRAM or PLAIN message comes near this


class AuthenticationFailed(Exception):
    """The exchange failed; the message is what SaslAuthenticate answers with."""


@dataclass(frozen=True)
class ScramMechanism:
    type: int  # Kafka's ScramMechanism code, as in AlterUserScramCredentials and the metadata record
    name: str
    hash_name: str
    min_iterations: int = 4096
    max_iterations: int = 16384

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


SCRAM_MECHANISMS = (ScramMechanism(1, "SCRAM-SHA-256", "sha256"), ScramMechanism(2, "SCRAM-SHA-512", "sha512"))


def scram_mechanism(name: str) -> ScramMechanism | None:
    return next((m for m in SCRAM_MECHANISMS if m.name == name), None)


def mechanism_by_type(code: int) -> ScramMechanism | None:
    return next((m for m in SCRAM_MECHANISMS if m.type == code), None)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted_password(mechanism: ScramMechanism, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    client_key = mechanism.hmac(salted_password, b"Client Key")
    return ScramCredential(salt, mechanism.hash(client_key), mechanism.hmac(salted_password, b"Server Key"),
                           iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, salt: bytes | None = None,
                             iterations: int = 4096) -> ScramCredential:
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


def _failed(mechanism: str) -> AuthenticationFailed:
    return AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials with "
                                f"SASL mechanism {mechanism}")


class ScramServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: ScramMechanism, lookup: Callable[[str], ScramCredential | None],
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.complete = False
        self.username: str | None = None
        self._lookup = lookup
        self._server_nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        self._step = 0
        self._user: str | None = None
        self._credential: ScramCredential | None = None
        self._known = False
        self._nonce = ""
        self._gs2_header = b""
        self._client_first_bare = ""
        self._server_first = ""

    def step(self, token: bytes) -> bytes:
        if len(token) > MAX_TOKEN_BYTES:
            raise AuthenticationFailed(f"SASL token of {len(token)} bytes is larger than {MAX_TOKEN_BYTES}")
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("SCRAM message is not UTF-8") from None
        self._step += 1
        if self._step == 1:
            return self._first(text).encode()
        if self._step == 2:
            return self._final(text).encode()
        raise AuthenticationFailed("SCRAM exchange already finished")

    def _first(self, text: str) -> str:
        flag, comma, rest = text.partition(",")
        if flag != "n":  # no channel binding over Kafka ('y' and 'p=' are refused, as Kafka's server does)
            raise AuthenticationFailed("Invalid SCRAM client first message: channel binding is not supported")
        authzid, comma2, bare = rest.partition(",")
        if not comma or not comma2 or (authzid and not authzid.startswith("a=")):
            raise AuthenticationFailed("Invalid SCRAM client first message")
        attributes = _attributes(bare)
        if list(attributes)[:2] != ["n", "r"] or not attributes["r"]:
            raise AuthenticationFailed("Invalid SCRAM client first message: expected n= and r=")
        user = _sasl_name(attributes["n"])
        if authzid and _sasl_name(authzid[2:]) != user:
            raise AuthenticationFailed("Authentication failed: the authorization id must equal the user name")
        if attributes.get("tokenauth", "false").lower() == "true":
            raise AuthenticationFailed("Delegation token authentication is not supported")
        credential = self._lookup(user)
        self._known = credential is not None
        if credential is None:
            credential = ScramCredential(secrets.token_bytes(32), secrets.token_bytes(64), b"", 4096)
        elif credential.iterations < self.mechanism.min_iterations:
            raise _failed(self.mechanism.name)
        self._user, self._credential = user, credential
        self._nonce = attributes["r"] + self._server_nonce
        self._gs2_header = f"{flag},{authzid},".encode()
        self._client_first_bare = bare
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first

    def _final(self, text: str) -> str:
        without_proof, comma, proof_part = text.rpartition(",")
        attributes = _attributes(without_proof) if comma else {}
        if not proof_part.startswith("p=") or list(attributes)[:2] != ["c", "r"]:
            raise AuthenticationFailed("Invalid SCRAM client final message")
        if _b64(attributes["c"]) != self._gs2_header:
            raise AuthenticationFailed("Invalid SCRAM client final message: channel binding does not match")
        if attributes["r"] != self._nonce:
            raise AuthenticationFailed("Invalid SCRAM client final message: nonce does not match")
        proof = _b64(proof_part[2:])
        credential, mechanism = self._credential, self.mechanism
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise _failed(mechanism.name)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not (hmac.compare_digest(mechanism.hash(client_key), credential.stored_key) and self._known):
            raise _failed(mechanism.name)
        self.complete, self.username = True, self._user
        return "v=" + base64.b64encode(mechanism.hmac(credential.server_key, auth_message)).decode()


class PlainServer:
    """One PLAIN exchange: ``authzid NUL authcid NUL password`` checked by ``check(user, password)``."""

    def __init__(self, check: Callable[[str, str], bool]) -> None:
        self.complete = False
        self.username: str | None = None
        self._check = check

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("PLAIN exchange already finished")
        if len(token) > MAX_TOKEN_BYTES:
            raise AuthenticationFailed(f"SASL token of {len(token)} bytes is larger than {MAX_TOKEN_BYTES}")
        try:
            parts = bytes(token).decode("utf-8").split("\0")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        if not self._check(user, password):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.complete, self.username = True, user
        return b""


def _attributes(text: str) -> dict[str, str]:
    """``k=v,k=v`` into an ordered dict; a part without ``=`` is a malformed message."""
    found = {}
    for part in text.split(","):
        key, equals, value = part.partition("=")
        if not equals or not key or key in found:
            raise AuthenticationFailed("Invalid SCRAM message")
        found[key] = value
    return found


def _sasl_name(text: str) -> str:
    """RFC 5802's saslname: ``=2C`` is ',' and ``=3D`` is '='; any other '=' is malformed."""
    out, index = [], 0
    while index < len(text):
        if text[index] == "=":
            escape = text[index:index + 3]
            if escape not in ("=2C", "=3D"):
                raise AuthenticationFailed("Invalid SCRAM user name escape")
            out.append("," if escape == "=2C" else "=")
            index += 3
        else:
            out.append(text[index])
            index += 1
    if not out:
        raise AuthenticationFailed("Invalid SCRAM message: empty user name")
    return "".join(out)


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise AuthenticationFailed("Invalid SCRAM message: bad base64") from None
