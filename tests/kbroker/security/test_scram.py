"""SCRAM-SHA-256/512 and PLAIN on the server side (kbroker/security/scram.py), driven by a small
RFC 5802 client written here, plus RFC 7677's published exchange."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.security.scram import (AuthenticationFailed, PlainServer, ScramServer, credential_from_password,
                                    credential_from_salted_password, mechanism_by_type, scram_mechanism)

SHA256, SHA512 = scram_mechanism("SCRAM-SHA-256"), scram_mechanism("SCRAM-SHA-512")


def client_exchange(mechanism, server: ScramServer, user: str, password: str, nonce: str = "clientnonce"):
    """Run a whole exchange as a client would; returns the server's final message."""
    first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={nonce}"
    server_first = server.step(f"n,,{first_bare}".encode()).decode()
    attributes = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), base64.b64decode(attributes["s"]),
                                 int(attributes["i"]))
    client_key = hmac.new(salted, b"Client Key", mechanism.hash_name).digest()
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    without_proof = f"c=biws,r={attributes['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, mechanism.hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return server.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode()).decode()


def test_rfc_7677_exchange():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = credential_from_password(SHA256, "pencil", salt, 4096)
    server = ScramServer(SHA256, {"user": credential}.get, nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("mechanism", [SHA256, SHA512], ids=lambda m: m.name)
def test_full_exchange_and_credentials_from_either_form(mechanism):
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, b"secret", salt, 8192)
    credential = credential_from_salted_password(mechanism, salt, salted, 8192)
    assert credential == credential_from_password(mechanism, "secret", salt, 8192)
    server = ScramServer(mechanism, {"al,i=ce": credential}.get)
    final = client_exchange(mechanism, server, "al,i=ce", "secret")
    assert final.startswith("v=") and server.username == "al,i=ce"
    with pytest.raises(AuthenticationFailed):
        server.step(b"anything")  # finished


@pytest.mark.parametrize("mechanism", [SHA256, SHA512], ids=lambda m: m.name)
def test_a_wrong_password_and_an_unknown_user_fail_alike_at_the_end(mechanism):
    credential = credential_from_password(mechanism, "secret")
    failures = []
    for user, password in (("alice", "wrong"), ("nobody", "secret")):
        server = ScramServer(mechanism, {"alice": credential}.get)
        with pytest.raises(AuthenticationFailed) as failure:
            client_exchange(mechanism, server, user, password)
        failures.append(str(failure.value))
        assert not server.complete and server.username is None
    assert failures[0] == failures[1] and mechanism.name in failures[0]


@pytest.mark.parametrize("final", [
    b"c=biws,r=clientnonceOTHER,p=AAAA",  # another nonce
    b"c=eSws,r={nonce},p=AAAA",  # channel binding of "y,,"
    b"c=biws,r={nonce},p=!!!",  # bad base64
    b"c=biws,r={nonce}",  # no proof
    b"r={nonce},c=biws,p=AAAA",  # out of order
])
def test_malformed_final_messages_fail(final):
    server = ScramServer(SHA256, {"a": credential_from_password(SHA256, "p")}.get, nonce="SERVER")
    server.step(b"n,,n=a,r=clientnonce")
    with pytest.raises(AuthenticationFailed):
        server.step(final.replace(b"{nonce}", b"clientnonceSERVER"))


@pytest.mark.parametrize("first", [b"y,,n=a,r=x", b"p=tls-unique,,n=a,r=x", b"n,,r=x,n=a", b"n,,n=,r=x",
                                   b"n,,n=a=2X,r=x", b"n,a=b,n=a,r=x", b"n,,n=a,r=", b"n,,n=a,r=x,tokenauth=true",
                                   b"\xff\xfe", b"n,,", b""])
def test_malformed_first_messages_fail(first):
    server = ScramServer(SHA256, {"a": credential_from_password(SHA256, "p")}.get)
    with pytest.raises(AuthenticationFailed):
        server.step(first)


def test_oversized_tokens_and_weak_credentials_fail():
    server = ScramServer(SHA256, lambda user: credential_from_password(SHA256, "p", iterations=1000))
    with pytest.raises(AuthenticationFailed):
        server.step(b"n,,n=a,r=" + b"x" * 70_000)
    with pytest.raises(AuthenticationFailed):
        ScramServer(SHA256, lambda user: credential_from_password(SHA256, "p", iterations=1000)).step(b"n,,n=a,r=x")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=120), min_size=1, max_size=3))
def test_random_input_only_ever_fails_cleanly(tokens):
    server = ScramServer(SHA512, {"a": credential_from_password(SHA512, "p", b"salt")}.get)
    plain = PlainServer(lambda user, password: (user, password) == ("a", "p"))
    for token in tokens:
        for exchange in (server, plain):
            try:
                exchange.step(token)
            except AuthenticationFailed:
                pass
    assert not server.complete


def test_mechanisms_by_name_and_type():
    assert mechanism_by_type(1) is SHA256 and mechanism_by_type(2) is SHA512 and mechanism_by_type(3) is None
    assert scram_mechanism("SCRAM-SHA-1") is None


@pytest.mark.parametrize("token, accepted", [
    (b"\0alice\0secret", True), (b"alice\0alice\0secret", True), (b"\0alice\0wrong", False),
    (b"bob\0alice\0secret", False), (b"\0\0secret", False), (b"\0alice\0", False), (b"alice\0secret", False),
    (b"\0alice\0secret\0", False), (b"\xff\0alice\0secret", False),
])
def test_plain(token, accepted):
    server = PlainServer(lambda user, password: (user, password) == ("alice", "secret"))
    if accepted:
        assert server.step(token) == b"" and server.username == "alice"
    else:
        with pytest.raises(AuthenticationFailed):
            server.step(token)
        assert server.username is None
