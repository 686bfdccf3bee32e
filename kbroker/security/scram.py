"""SASL mechanisms on the server side, as Kafka implements them: SCRAM-SHA-256/512 (RFC 5802,
RFC 7677) and PLAIN (RFC 4616).

Sans-IO: an exchange takes the client's tokens one at a time and returns the server's answers,
raising :class:`AuthenticationFailed` with the message SaslAuthenticate sends back. Like Kafka's
SaslServerAuthenticator, that message is one generic sentence for every malformed or wrong
message; the reason is kept in ``detail`` for the broker's log.

The broker keeps only what SCRAM's server needs (salt, StoredKey, ServerKey, iterations), never a
password. An unknown user goes through the whole exchange against a made-up credential whose salt
is stable per user name, and fails where a wrong password fails, so a client cannot tell the two
apart. (Kafka refuses an unknown user at the first message; we deliberately do not.)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Callable

MAX_TOKEN_BYTES = 64 * 1024  # SCRAM and PLAIN messages are a few hundred bytes
_UNKNOWN_USER_ITERATIONS = 4096
# One key per process: an unknown user's salt is the same on every attempt (a fresh random salt
# would give the user's absence away) yet cannot be computed from outside.
_UNKNOWN_USER_SALT_KEY = secrets.token_bytes(32)


class AuthenticationFailed(Exception):
    """The exchange failed: ``str()`` is what SaslAuthenticate answers, ``detail`` is for the log only."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message


def _invalid_credentials(mechanism: str, detail: str) -> AuthenticationFailed:
    # Kafka answers every SaslException of a mechanism with this sentence and nothing more
    return AuthenticationFailed("Authentication failed during authentication due to invalid credentials with "
                                f"SASL mechanism {mechanism}", detail)


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


def credential_of(record) -> ScramCredential | None:
    """The credential a UserScramCredentialRecord of the metadata holds (None for None)."""
    if record is None:
        return None
    return ScramCredential(record.salt, record.stored_key, record.server_key, record.iterations)


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


class ScramServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final.

    A failed step ends the exchange; the broker answers it and closes the connection."""

    def __init__(self, mechanism: ScramMechanism, lookup: Callable[[str], ScramCredential | None],
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.complete = False
        self.username: str | None = None
        self._lookup = lookup
        # letters, digits, '-' and '_': printable and free of ',' as RFC 5802 wants
        self._server_nonce = secrets.token_urlsafe(24) if nonce is None else nonce
        self._expecting = "client-first"  # then "client-final", then "nothing"
        self._first: _ClientFirst | None = None
        self._credential: ScramCredential | None = None
        self._refusal = ""  # a reason to fail at the final message whatever the proof
        self._server_first = ""

    def step(self, token: bytes) -> bytes:
        expecting, self._expecting = self._expecting, "nothing"  # until this step succeeds
        if expecting == "nothing":
            raise self._invalid("a SCRAM message after the exchange ended")
        text = _decode(token, self.mechanism.name)
        if expecting == "client-first":
            answer = self._answer_client_first(text)
            self._expecting = "client-final"
            return answer.encode()
        return self._answer_client_final(text).encode()

    def _invalid(self, detail: str) -> AuthenticationFailed:
        return _invalid_credentials(self.mechanism.name, detail)

    def _answer_client_first(self, text: str) -> str:
        try:
            first = _parse_client_first(text)
        except ValueError as malformed:
            raise self._invalid(f"invalid client-first message: {malformed}") from None
        if first.authzid is not None and first.authzid != first.user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        if first.extensions.get("tokenauth", "").lower() == "true":
            raise AuthenticationFailed("Authentication failed: delegation tokens are not supported")
        credential = self._lookup(first.user)
        if credential is None:
            credential, self._refusal = _unknown_user_credential(self.mechanism, first.user), "unknown user"
        elif credential.iterations < self.mechanism.min_iterations:
            # refused at the end like a wrong password, so as not to single out this user
            self._refusal = f"{credential.iterations} iterations, fewer than {self.mechanism.min_iterations}"
        self._first, self._credential = first, credential
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={first.nonce}{self._server_nonce},s={salt},i={credential.iterations}"
        return self._server_first

    def _answer_client_final(self, text: str) -> str:
        first, credential, mechanism = self._first, self._credential, self.mechanism
        try:
            channel_binding, nonce, proof, without_proof = _parse_client_final(text)
        except ValueError as malformed:
            raise self._invalid(f"invalid client-final message: {malformed}") from None
        if channel_binding != first.gs2_header:
            raise self._invalid("the channel binding is not the client-first message's gs2 header")
        if nonce != first.nonce + self._server_nonce:
            raise self._invalid("the nonce is not the one the server sent")
        auth_message = f"{first.bare},{self._server_first},{without_proof}".encode()
        signature = mechanism.hmac(credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        proven = len(proof) == len(signature) and hmac.compare_digest(mechanism.hash(client_key),
                                                                       credential.stored_key)
        if self._refusal or not proven:
            raise self._invalid(self._refusal or "wrong client proof")
        self.complete, self.username = True, first.user
        return "v=" + base64.b64encode(mechanism.hmac(credential.server_key, auth_message)).decode()


class PlainServer:
    """One PLAIN exchange: a single ``authzid NUL authcid NUL password`` token checked by
    ``check(user, password)``, answered with an empty token."""

    def __init__(self, check: Callable[[str, str], bool]) -> None:
        self.complete = False
        self.username: str | None = None
        self._check = check
        self._finished = False

    def step(self, token: bytes) -> bytes:
        finished, self._finished = self._finished, True  # one token, right or wrong
        if finished:
            raise _invalid_credentials("PLAIN", "a PLAIN token after the exchange ended")
        parts = _decode(token, "PLAIN").split("\0")
        if len(parts) != 3:
            raise _invalid_credentials("PLAIN", f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if not self._check(user, password):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:  # checked after the password, in Kafka's order
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.complete, self.username = True, user
        return b""


def _decode(token: bytes, mechanism: str) -> str:
    if len(token) > MAX_TOKEN_BYTES:
        raise AuthenticationFailed(f"SASL token of {len(token)} bytes is larger than the limit of {MAX_TOKEN_BYTES}")
    try:
        return bytes(token).decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid_credentials(mechanism, "the SASL token is not UTF-8") from None


def _unknown_user_credential(mechanism: ScramMechanism, user: str) -> ScramCredential:
    salt = hmac.new(_UNKNOWN_USER_SALT_KEY, f"{mechanism.name}\0{user}".encode(), "sha256").digest()
    # a salted password nobody knows: no proof can match it
    return credential_from_salted_password(mechanism, salt, secrets.token_bytes(64), _UNKNOWN_USER_ITERATIONS)


@dataclass(frozen=True)
class _ClientFirst:
    gs2_header: bytes  # the client-final message echoes it, base64-encoded, as its channel binding
    authzid: str | None
    user: str
    nonce: str
    extensions: dict[str, str]
    bare: str  # client-first-message-bare, the start of the AuthMessage


def _parse_client_first(text: str) -> _ClientFirst:
    """``n,[a=authzid],n=saslname,r=nonce[,extension=value...]``; raises ValueError."""
    parts = text.split(",", 2)
    if len(parts) != 3:
        raise ValueError("no gs2 header")
    flag, authzid, bare = parts
    if flag != "n":  # 'y' or 'p=...': Kafka supports no channel binding and its server refuses both
        raise ValueError(f"channel binding flag {flag!r} is not supported")
    if authzid and not authzid.startswith("a="):
        raise ValueError("malformed authzid")
    attributes = _attributes(bare)
    if list(attributes)[:2] != ["n", "r"]:  # this also refuses RFC 5802's mandatory extension 'm='
        raise ValueError("expected n= and r= first")
    user, nonce = _sasl_name(attributes.pop("n")), attributes.pop("r")
    if not nonce or not all("!" <= char <= "~" for char in nonce):
        raise ValueError("the nonce is not printable ASCII")
    return _ClientFirst(f"{flag},{authzid},".encode(), _sasl_name(authzid[2:]) if authzid else None, user,
                        nonce, attributes, bare)


def _parse_client_final(text: str) -> tuple[bytes, str, bytes, str]:
    """``c=channel-binding,r=nonce[,extension=value...],p=proof`` into those three and the message
    without its proof (the end of the AuthMessage); raises ValueError."""
    attributes = _attributes(text)
    names = list(attributes)
    if names[:2] != ["c", "r"] or names[-1] != "p":
        raise ValueError("expected c=, r= first and p= last")
    # validate=True: refuse characters outside the alphabet rather than skip them
    return (base64.b64decode(attributes["c"], validate=True), attributes["r"],
            base64.b64decode(attributes["p"], validate=True), text.rsplit(",", 1)[0])


def _attributes(text: str) -> dict[str, str]:
    """``name=value,...`` into a dict in message order; values cannot hold ',' (RFC 5802 escapes it)."""
    found: dict[str, str] = {}
    for part in text.split(","):
        name, equals, value = part.partition("=")
        if not equals or not (name.isascii() and name.isalpha()) or name in found:
            raise ValueError(f"malformed attribute {part[:20]!r}")
        found[name] = value
    return found


def _sasl_name(text: str) -> str:
    """RFC 5802's saslname: '=2C' is ',' and '=3D' is '='; any other '=' and NUL are malformed."""
    pieces = text.split("=")
    for piece in pieces[1:]:
        if not piece.startswith(("2C", "3D")):
            raise ValueError("malformed '=' escape in a name")
    name = pieces[0] + "".join(("," if piece[:2] == "2C" else "=") + piece[2:] for piece in pieces[1:])
    if not name or "\0" in name:
        raise ValueError("empty name or NUL in a name")
    return name


class ScramClient:
    """The client's side of one SCRAM exchange, as a broker uses it to reach another node:
    ``first()``, then ``final(server_first)``, then ``verify(server_final)``, which raises
    :class:`AuthenticationFailed` unless the server proved it knows the credential too."""

    def __init__(self, mechanism: ScramMechanism, user: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._password = password
        self._nonce = secrets.token_urlsafe(24) if nonce is None else nonce
        self._first_bare = f"n={_escape_sasl_name(user)},r={self._nonce}"
        self._auth_message = b""
        self._server_key = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        mechanism = self.mechanism
        text = _decode(server_first, mechanism.name)
        try:
            attributes = _attributes(text)
            nonce, salt, iterations = attributes["r"], base64.b64decode(attributes["s"], validate=True), \
                int(attributes["i"])
        except (ValueError, KeyError) as malformed:
            raise AuthenticationFailed(f"{mechanism.name}: malformed server-first message: {malformed!r}") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise AuthenticationFailed(f"{mechanism.name}: the server's nonce does not extend the client's")
        if not mechanism.min_iterations <= iterations <= mechanism.max_iterations:
            raise AuthenticationFailed(f"{mechanism.name}: {iterations} iterations, outside "
                                       f"{mechanism.min_iterations}-{mechanism.max_iterations}")
        salted = hashlib.pbkdf2_hmac(mechanism.hash_name, self._password.encode(), salt, iterations)
        client_key = mechanism.hmac(salted, b"Client Key")
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        self._auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = mechanism.hmac(mechanism.hash(client_key), self._auth_message)
        self._server_key = mechanism.hmac(salted, b"Server Key")
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        expected = "v=" + base64.b64encode(self.mechanism.hmac(self._server_key, self._auth_message)).decode()
        if not self._auth_message or not hmac.compare_digest(bytes(server_final), expected.encode()):
            raise AuthenticationFailed(f"{self.mechanism.name}: the server's signature is wrong")


def plain_token(user: str, password: str) -> bytes:
    """PLAIN's one client message (RFC 4616): no authorization id, the user, the password."""
    return f"\0{user}\0{password}".encode()


def _escape_sasl_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")
