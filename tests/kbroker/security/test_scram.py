"""SCRAM-SHA-256/512 and PLAIN on the server side (kbroker/security/scram.py), driven by a small
RFC 5802 client written here from the RFC, and checked against RFC 7677's published exchange."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.security.scram import (MAX_TOKEN_BYTES, SCRAM_MECHANISMS, AuthenticationFailed, PlainServer,
                                    ScramCredential, ScramServer, credential_from_password,
                                    credential_from_salted_password, mechanism_by_type, scram_mechanism)

SHA256, SHA512 = scram_mechanism("SCRAM-SHA-256"), scram_mechanism("SCRAM-SHA-512")
MECHANISMS = pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS, ids=lambda m: m.name)


def invalid_credentials(mechanism: str) -> str:
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


def escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class ScramClient:
    """RFC 5802's client: client-first, then client-final from the server-first, then check server-final."""

    def __init__(self, mechanism, user: str, password: str, nonce: str = "clientnonce", authzid: str = "",
                 final_extensions: str = "") -> None:
        self.mechanism, self.password, self.nonce = mechanism, password, nonce
        self.gs2_header = f"n,{'a=' + escape(authzid) if authzid else ''},"
        self.first_bare = f"n={escape(user)},r={nonce}"
        self.final_extensions = final_extensions  # e.g. ",x=y": extensions go between r= and p=
        self.auth_message = self.server_key = b""

    def first_message(self) -> bytes:
        return (self.gs2_header + self.first_bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        attributes = dict(part.split("=", 1) for part in server_first.decode().split(","))
        assert attributes["r"].startswith(self.nonce) and len(attributes["r"]) > len(self.nonce)
        name = self.mechanism.hash_name
        salted = hashlib.pbkdf2_hmac(name, self.password.encode(), base64.b64decode(attributes["s"]),
                                     int(attributes["i"]))
        client_key = hmac.new(salted, b"Client Key", name).digest()
        stored_key = hashlib.new(name, client_key).digest()
        without_proof = f"c={b64(self.gs2_header.encode())},r={attributes['r']}{self.final_extensions}"
        self.auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, self.auth_message, name).digest()
        self.server_key = hmac.new(salted, b"Server Key", name).digest()
        return f"{without_proof},p={b64(bytes(a ^ b for a, b in zip(client_key, signature)))}".encode()

    def verifies(self, server_final: bytes) -> bool:
        expected = hmac.new(self.server_key, self.auth_message, self.mechanism.hash_name).digest()
        return server_final == f"v={b64(expected)}".encode()


def exchange(server: ScramServer, client: ScramClient) -> bytes:
    return server.step(client.final_message(server.step(client.first_message())))


def users(mechanism, **passwords: str):
    return {user: credential_from_password(mechanism, password) for user, password in passwords.items()}.get


# RFC 7677, section 3
RFC_SALT, RFC_SERVER_NONCE = "W22ZaJ0SNY7soEsUEjb6gQ==", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc_7677_exchange():
    credential = credential_from_password(SHA256, "pencil", base64.b64decode(RFC_SALT), 4096)
    server = ScramServer(SHA256, {"user": credential}.get, nonce=RFC_SERVER_NONCE)
    assert server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == RFC_SERVER_FIRST
    assert not server.complete and server.username is None
    assert server.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"


def test_the_test_client_reproduces_rfc_7677():
    client = ScramClient(SHA256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final_message(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert client.verifies(RFC_SERVER_FINAL)


@MECHANISMS
def test_full_exchange_with_either_form_of_credential(mechanism):
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, b"secret", salt, 8192)
    credential = credential_from_salted_password(mechanism, salt, salted, 8192)
    assert credential == credential_from_password(mechanism, "secret", salt, 8192)
    assert len(credential.stored_key) == len(credential.server_key) == hashlib.new(mechanism.hash_name).digest_size
    server = ScramServer(mechanism, {"alice": credential}.get)
    client = ScramClient(mechanism, "alice", "secret")
    assert client.verifies(exchange(server, client))
    assert server.complete and server.username == "alice"


def test_random_salts_and_server_nonces():
    first, second = credential_from_password(SHA512, "p"), credential_from_password(SHA512, "p")
    assert len(first.salt) == 32 and first.salt != second.salt and first.iterations == 4096
    nonces = set()
    for _ in range(2):
        server = ScramServer(SHA256, users(SHA256, a="p"))
        nonce = dict(part.split("=", 1) for part in server.step(b"n,,n=a,r=abc").decode().split(","))["r"]
        assert nonce.startswith("abc") and "," not in nonce and all("!" <= char <= "~" for char in nonce)
        nonces.add(nonce)
    assert len(nonces) == 2


@MECHANISMS
def test_a_wrong_password_and_an_unknown_user_fail_alike_and_only_at_the_end(mechanism):
    lookup = users(mechanism, alice="secret")
    failures = []
    for user, password in (("alice", "wrong"), ("nobody", "secret")):
        server, client = ScramServer(mechanism, lookup), ScramClient(mechanism, user, password)
        final = client.final_message(server.step(client.first_message()))  # the first step passes
        with pytest.raises(AuthenticationFailed) as failure:
            server.step(final)
        failures.append(failure.value)
        assert not server.complete and server.username is None
    assert str(failures[0]) == str(failures[1]) == invalid_credentials(mechanism.name)
    assert failures[0].detail == "wrong client proof" and failures[1].detail == "unknown user"


def test_an_unknown_users_salt_is_the_same_on_every_attempt():
    def salt_and_iterations(user: str) -> bytes:
        return ScramServer(SHA256, lambda user: None).step(f"n,,n={user},r=abc".encode()).split(b",", 1)[1]

    assert salt_and_iterations("nobody") == salt_and_iterations("nobody") != salt_and_iterations("someone")
    assert salt_and_iterations("nobody").endswith(b",i=4096")


def test_a_credential_with_too_few_iterations_fails_at_the_end():
    weak = credential_from_password(SHA256, "p", iterations=1000)
    server, client = ScramServer(SHA256, {"a": weak}.get), ScramClient(SHA256, "a", "p")
    with pytest.raises(AuthenticationFailed, match="invalid credentials") as failure:
        exchange(server, client)
    assert "1000 iterations" in failure.value.detail and not server.complete


def test_no_step_after_the_exchange_ends():
    server = ScramServer(SHA256, users(SHA256, a="p"))
    exchange(server, ScramClient(SHA256, "a", "p"))
    with pytest.raises(AuthenticationFailed):
        server.step(b"n,,n=a,r=x")
    failed = ScramServer(SHA256, lambda user: None)
    with pytest.raises(AuthenticationFailed):
        failed.step(b"not a scram message")
    with pytest.raises(AuthenticationFailed):  # a failed first step ends the exchange too
        failed.step(b"c=,r=,p=")
    assert not failed.complete


@pytest.mark.parametrize("final", [
    b"c=biws,r=clientnonceOTHER,p={proof}",  # another nonce
    b"c=biws,r=clientnonce,p={proof}",  # the client's nonce alone
    b"c=eSws,r={nonce},p={proof}",  # channel binding of "y,,"
    b"c=bixhPWEs,r={nonce},p={proof}",  # channel binding of "n,a=a,"
    b"c=biws,r={nonce},p=!!!!",  # bad base64
    b"c=biws,r={nonce},p=AAA",  # bad padding
    b"c=bi ws,r={nonce},p={proof}",  # characters outside base64's alphabet
    b"c=biws,r={nonce},p=AAAA",  # a proof of the wrong length
    b"c=biws,r={nonce}",  # no proof
    b"r={nonce},c=biws,p={proof}",  # out of order
    b"c=biws,r={nonce},p={proof},x=y",  # proof not last
    b"c=biws,r={nonce},r={nonce},p={proof}",  # repeated attribute
    b"c=biws,,r={nonce},p={proof}",  # empty attribute
])
def test_malformed_final_messages_fail(final):
    server = ScramServer(SHA256, users(SHA256, a="p"), nonce="SERVER")
    client = ScramClient(SHA256, "a", "p")
    good = client.final_message(server.step(client.first_message()))
    proof = good.rsplit(b",p=", 1)[1]
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        server.step(final.replace(b"{nonce}", b"clientnonceSERVER").replace(b"{proof}", proof))


def test_every_truncation_of_a_final_message_fails():
    client = ScramClient(SHA256, "a", "p")
    first = ScramServer(SHA256, users(SHA256, a="p"), nonce="SERVER").step(client.first_message())
    good = client.final_message(first)
    for length in range(len(good)):
        server = ScramServer(SHA256, users(SHA256, a="p"), nonce="SERVER")
        server.step(client.first_message())
        with pytest.raises(AuthenticationFailed):
            server.step(good[:length])


def test_extensions_in_the_final_message_are_covered_by_the_proof():
    server, client = ScramServer(SHA256, users(SHA256, a="p")), ScramClient(SHA256, "a", "p", final_extensions=",x=y")
    assert client.verifies(exchange(server, client)) and server.complete


@pytest.mark.parametrize("first", [
    b"y,,n=a,r=x", b"p=tls-unique,,n=a,r=x",  # channel binding
    b"n,,r=x,n=a", b"n,,n=a", b"n,,n=,r=x", b"n,,n=a,r=", b"n,,m=ext,n=a,r=x",  # attributes
    b"n,,n=a,r=x,", b"n,,n=a,r=x,r=y", b"n,,n=a,r=x,=y", b"n,,n=a,r=x,tokenauth",
    b"n,,n=a,r=x y", "n,,n=a,r=\u00e9".encode(), b"n,,n=a,r=\x7f",  # nonce not printable ASCII
    b"n,,n=a=2X,r=x", b"n,,n=a=2c,r=x", b"n,,n=a=,r=x", b"n,,n=a=3,r=x", b"n,,n=a\0b,r=x",  # name escapes, NUL
    b"n,b=a,n=a,r=x", b"n,a=,n=a,r=x",  # authzid
    b"\xff\xfe", b"n,,", b"n,", b"n", b"",
])
def test_malformed_first_messages_fail(first):
    server = ScramServer(SHA256, users(SHA256, a="p"))
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        server.step(first)
    assert not server.complete


def test_sasl_names_are_unescaped():
    asked = []
    server = ScramServer(SHA512, lambda user: asked.append(user))
    server.step(b"n,,n==3Da=2Cb=3D=3D=2C,r=x")
    assert asked == ["=a,b==,"]
    server = ScramServer(SHA512, users(SHA512, **{"a,b=c": "p"}))
    exchange(server, ScramClient(SHA512, "a,b=c", "p"))
    assert server.username == "a,b=c"


def test_an_authzid_must_be_the_user_name():
    server, client = ScramServer(SHA256, users(SHA256, **{"a,b": "p"})), ScramClient(SHA256, "a,b", "p", authzid="a,b")
    assert client.first_message().startswith(b"n,a=a=2Cb,")
    assert client.verifies(exchange(server, client)) and server.username == "a,b"
    with pytest.raises(AuthenticationFailed, match="authorization id that is different from username"):
        ScramServer(SHA256, users(SHA256, a="p", b="p")).step(b"n,a=b,n=a,r=x")


def test_delegation_tokens_are_refused_clearly():
    with pytest.raises(AuthenticationFailed, match="delegation tokens are not supported"):
        ScramServer(SHA256, users(SHA256, a="p")).step(b"n,,n=a,r=x,tokenauth=TRUE")
    assert ScramServer(SHA256, users(SHA256, a="p")).step(b"n,,n=a,r=x,tokenauth=false").startswith(b"r=x")


def test_oversized_tokens_fail():
    scram, plain = ScramServer(SHA256, users(SHA256, a="p")), PlainServer(lambda user, password: True)
    for server in (scram, plain):
        with pytest.raises(AuthenticationFailed, match="larger than the limit"):
            server.step(b"n,,n=a,r=" + b"x" * MAX_TOKEN_BYTES)
    assert ScramServer(SHA256, lambda user: None).step(b"n,,n=a,r=" + b"x" * (MAX_TOKEN_BYTES - 9))


tokens = st.one_of(st.binary(max_size=120), st.text(max_size=120).map(str.encode),
                   st.lists(st.sampled_from(["n", "a=a", "n=a", "r=x", "c=biws", "p=AAAA", "=2C", "", "\0"]),
                            max_size=6).map(lambda parts: ",".join(parts).encode()))


@settings(max_examples=300, deadline=None)
@given(st.lists(tokens, min_size=1, max_size=3))
def test_random_input_only_ever_fails_cleanly(messages):
    scram = ScramServer(SHA512, users(SHA512, a="p"))
    plain = PlainServer(lambda user, password: (user, password) == ("a", "p"))
    for message in messages:
        for server in (scram, plain):
            try:
                server.step(message)
            except AuthenticationFailed:
                pass
    assert not scram.complete


@settings(max_examples=300, deadline=None)
@given(tokens)
def test_random_final_messages_only_ever_fail_cleanly(final):
    server = ScramServer(SHA256, users(SHA256, a="p"), nonce="S")
    server.step(b"n,,n=a,r=x")
    with pytest.raises(AuthenticationFailed):
        server.step(final)
    assert not server.complete and server.username is None


def test_mechanisms_by_name_and_type():
    assert mechanism_by_type(1) is SHA256 and mechanism_by_type(2) is SHA512 and mechanism_by_type(3) is None
    assert (SHA256.hash_name, SHA512.hash_name) == ("sha256", "sha512") and SHA256.min_iterations == 4096
    assert scram_mechanism("SCRAM-SHA-1") is None and SHA512.max_iterations == 16384
    assert ScramCredential(b"s", b"k", b"v", 4096) == ScramCredential(b"s", b"k", b"v", 4096)


BAD_USER_OR_PASSWORD = "Authentication failed: Invalid username or password"


@pytest.mark.parametrize("token, failure", [
    (b"\0alice\0secret", None), (b"alice\0alice\0secret", None),
    (b"\0alice\0wrong", BAD_USER_OR_PASSWORD), (b"\0bob\0secret", BAD_USER_OR_PASSWORD),
    (b"bob\0alice\0secret", "authorization id that is different from username"),
    (b"\0\0secret", "username not specified"), (b"\0alice\0", "password not specified"),
    (b"alice\0secret", invalid_credentials("PLAIN")), (b"\0alice\0secret\0", invalid_credentials("PLAIN")),
    (b"", invalid_credentials("PLAIN")), (b"\xff\0alice\0secret", invalid_credentials("PLAIN")),
])
def test_plain(token, failure):
    server = PlainServer(lambda user, password: (user, password) == ("alice", "secret"))
    if failure is None:
        assert server.step(token) == b"" and server.complete and server.username == "alice"
    else:
        with pytest.raises(AuthenticationFailed) as raised:
            server.step(token)
        assert failure in str(raised.value) and not server.complete and server.username is None
    with pytest.raises(AuthenticationFailed):  # one token per exchange, right or wrong
        server.step(b"\0alice\0secret")
