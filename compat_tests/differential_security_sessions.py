"""Scripted sessions for the differential suite's security part (compat_tests/test_differential_security.py):
SASL (PLAIN and SCRAM-SHA-256), SCRAM credentials, ACLs, client quotas, and what a user without ACLs is
refused on a SASL_PLAINTEXT listener with the ACL authorizer on, then granted.

Both brokers listen with SASL_PLAINTEXT (PLAIN and SCRAM-SHA-256), know ``USERS`` for PLAIN and have a
SCRAM-SHA-256 credential for each of them (4096 iterations) before the first session; ``admin`` is a
super user and nobody else has an ACL. Not named ``differential_sessions*.py``: the single-node suite,
whose brokers have no SASL listener, collects those.

A session gets one side (a broker's SASL listener, not yet authenticated) and opens one connection per
user it speaks as (``logged_in``), each logged in with its handshake and authentication recorded; all of
them write into one transcript, in the order they were sent. ``wait_*`` calls are not recorded: what an
ACL change takes to reach the broker's authorizer is not compared.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import time

from compat_tests.differential_sessions import create_topics, metadata, produce, request, values, versions, wait_led
from compat_tests.differential_sessions_groups import (JoinGroup, OffsetCommit, OffsetFetch, SUBSCRIPTION,
                                                       wait_coordinator, wait_producer_ids, wait_serving)
from kbroker.wire.schema import API_BY_NAME
from testkit.differential import Side

READY_TIMEOUT_S = 30
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SCRAM_ITERATIONS = 4096  # the storage tool's --add-scram default, which the kbroker fixture copies
CLIENT_NONCE = "differentialclientnonce"  # the client's part of a SCRAM nonce: the sessions' own, fixed
SCRAM_SHA_256, SCRAM_SHA_512 = 1, 2
# ACL codes (Kafka's ResourceType, PatternType, AclOperation, AclPermissionType)
ANY = 1
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
MATCH, LITERAL, PREFIXED = 2, 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS = 10, 11, 12, 13, 14
TWO_PHASE_COMMIT = 15  # KIP-939, in Kafka 4.4's AclOperation
DENY, ALLOW = 2, 3
# DescribeClientQuotas match types
EXACT, DEFAULT, SPECIFIED = 0, 1, 2

AlterUserScramCredentials = API_BY_NAME["AlterUserScramCredentials"].request_class
DescribeUserScramCredentials = API_BY_NAME["DescribeUserScramCredentials"].request_class
CreateAcls = API_BY_NAME["CreateAcls"].request_class
DeleteAcls = API_BY_NAME["DeleteAcls"].request_class
AlterClientQuotas = API_BY_NAME["AlterClientQuotas"].request_class
DescribeClientQuotas = API_BY_NAME["DescribeClientQuotas"].request_class
DescribeConfigs = API_BY_NAME["DescribeConfigs"].request_class
Fetch = API_BY_NAME["Fetch"].request_class
ListOffsets = API_BY_NAME["ListOffsets"].request_class
DeleteTopics = API_BY_NAME["DeleteTopics"].request_class


# -- SASL on a raw connection ------------------------------------------------------------------------------

def plain_token(user: str, password: str, authorization_id: str = "") -> bytes:
    return f"{authorization_id}\0{user}\0{password}".encode()


def plain(side: Side, user: str, password: str | None = None, *, handshake: int = 1, authenticate: int = 2):
    """SaslHandshake (PLAIN) then SaslAuthenticate on the side's connection: the authentication's answer."""
    side.call("SaslHandshake", handshake, request("SaslHandshake", mechanism="PLAIN"))
    password = USERS.get(user, "x") if password is None else password
    return side.call("SaslAuthenticate", authenticate, request("SaslAuthenticate",
                                                               auth_bytes=plain_token(user, password)))


def salted_password(password: str, salt: bytes, iterations: int = SCRAM_ITERATIONS) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)


def scram(side: Side, user: str, password: str | None = None, *, authenticate: int = 2, nonce_suffix: str = ""):
    """A SCRAM-SHA-256 exchange (RFC 5802) as a client makes it: the handshake, the client's first message
    (a fixed client nonce), then its final message with the proof computed from the server's first one
    (its nonce, salt and iterations). ``nonce_suffix`` spoils the nonce of the final message. The last
    answer (None: the broker closed the connection); after a refusal the final message goes all the same."""
    password = USERS.get(user, "x") if password is None else password
    side.call("SaslHandshake", 1, request("SaslHandshake", mechanism="SCRAM-SHA-256"))
    first_bare = f"n={user},r={CLIENT_NONCE}"
    answer = side.call("SaslAuthenticate", authenticate,
                       request("SaslAuthenticate", auth_bytes=f"n,,{first_bare}".encode()))
    server_first = bytes(answer.auth_bytes).decode(errors="replace") if answer is not None else ""
    fields = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
    if answer is None or answer.error_code != 0 or not {"r", "s", "i"} <= set(fields):
        # refused: the final message is sent all the same, so that both brokers' sessions go on alike
        fields = {"r": CLIENT_NONCE, "s": "", "i": "4096"}
    salted = salted_password(password, base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    without_proof = f"c=biws,r={fields['r']}{nonce_suffix}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message, hashlib.sha256).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    return side.call("SaslAuthenticate", authenticate,
                     request("SaslAuthenticate", auth_bytes=f"{without_proof},p={proof}".encode()))


@contextlib.contextmanager
def logged_in(side: Side, user: str, *, mechanism: str = "PLAIN"):
    """A connection of its own to the side's broker, logged in as ``user``, writing into its transcript."""
    other = Side(side.name, side.host, side.port)
    other.transcript = side.transcript
    try:
        if mechanism == "PLAIN":
            plain(other, user)
        else:  # SCRAM-SHA-256, the one SCRAM mechanism the listeners offer
            scram(other, user)
        yield other
    finally:
        other.close()


# -- requests ----------------------------------------------------------------------------------------------

def upsertion(user: str, password: str = "pw", *, mechanism: int = SCRAM_SHA_256, iterations: int = SCRAM_ITERATIONS,
              salt: bytes = b"differential-salt"):
    return AlterUserScramCredentials.ScramCredentialUpsertion(
        name=user, mechanism=mechanism, iterations=iterations, salt=salt,
        salted_password=salted_password(password, salt, iterations))


def deletion(user: str, mechanism: int = SCRAM_SHA_256):
    return AlterUserScramCredentials.ScramCredentialDeletion(name=user, mechanism=mechanism)


def alter_scram(side: Side, *, upsertions=(), deletions=(), record: bool = True):
    return side.call("AlterUserScramCredentials", 0, request(
        "AlterUserScramCredentials", upsertions=list(upsertions), deletions=list(deletions)), record=record)


def describe_scram(admin: Side, users: list[str] | None):
    """DescribeUserScramCredentials once the broker's image holds what was changed before."""
    wait_metadata_applied(admin)
    return describe_users(admin, users)


def describe_users(side: Side, users: list[str] | None):
    return side.call("DescribeUserScramCredentials", 0, request(
        "DescribeUserScramCredentials",
        users=None if users is None else [DescribeUserScramCredentials.UserName(name=name) for name in users]))


def acl(resource_type: int, name: str | None, pattern: int, principal: str | None = "User:alice",
        host: str | None = "*", operation: int = READ, permission: int = ALLOW) -> tuple:
    """One binding, or one filter (None: any name, principal or host)."""
    return resource_type, name, pattern, principal, host, operation, permission


def create_acls(side: Side, version: int, *bindings: tuple, record: bool = True):
    return side.call("CreateAcls", version, request("CreateAcls", creations=[CreateAcls.AclCreation(
        resource_type=kind, resource_name=name, resource_pattern_type=pattern, principal=principal, host=host,
        operation=operation, permission_type=permission)
        for kind, name, pattern, principal, host, operation, permission in bindings]), record=record)


def describe_acls(admin: Side, version: int, acl_filter: tuple):
    """DescribeAcls once the broker's authorizer holds what was changed before."""
    wait_acls_applied(admin)
    return describe_bindings(admin, version, acl_filter)


def describe_bindings(side: Side, version: int, acl_filter: tuple, record: bool = True):
    kind, name, pattern, principal, host, operation, permission = acl_filter
    return side.call("DescribeAcls", version, request(
        "DescribeAcls", resource_type_filter=kind, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=principal, host_filter=host, operation=operation, permission_type=permission),
        record=record)


def delete_acls(side: Side, version: int, *filters: tuple, record: bool = True):
    return side.call("DeleteAcls", version, request("DeleteAcls", filters=[DeleteAcls.DeleteAclsFilter(
        resource_type_filter=kind, resource_name_filter=name, pattern_type_filter=pattern, principal_filter=principal,
        host_filter=host, operation=operation, permission_type=permission)
        for kind, name, pattern, principal, host, operation, permission in filters]), record=record)


def grant(admin: Side, *bindings: tuple) -> None:
    """CreateAcls (recorded), then until the broker's authorizer has them (unrecorded)."""
    create_acls(admin, 3, *bindings)
    wait_acls_applied(admin)


# -- waits: a change answered by the controller reaches the broker's image and authorizer a moment later ----

BARRIER = "differential-barrier"


def _wait(side: Side, what: str, done) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{side.name}: {what} not applied within {READY_TIMEOUT_S} s")
        time.sleep(0.02)


def wait_acls_applied(admin: Side) -> None:
    """Until the broker's authorizer holds every ACL change made before (unrecorded): a barrier ACL added
    and removed again, each waited for (ACL changes are applied in the metadata log's order)."""
    barrier = acl(TOPIC, BARRIER, LITERAL, "User:barrier")
    create_acls(admin, 3, barrier, record=False)
    _wait(admin, "an ACL", lambda: describe_bindings(admin, 3, barrier, record=False).resources)
    delete_acls(admin, 3, barrier, record=False)
    _wait(admin, "an ACL's removal", lambda: not describe_bindings(admin, 3, barrier, record=False).resources)


def wait_metadata_applied(admin: Side) -> None:
    """Until the broker's metadata image holds every change made before (unrecorded): a barrier client
    quota set and removed again, each waited for."""
    for value in (1.0, None):
        admin.call("AlterClientQuotas", 1, _quota_request(({"client-id": BARRIER}, {"request_percentage": value}),
                                                          validate_only=False), record=False)

        def applied(value=value):
            answer = admin.call("DescribeClientQuotas", 1, request("DescribeClientQuotas", strict=True, components=[
                DescribeClientQuotas.ComponentData(entity_type="client-id", match_type=EXACT, match=BARRIER)]),
                record=False)
            return bool(answer.entries) == (value is not None)
        _wait(admin, "a client quota", applied)


def wait_scram_login(side: Side, user: str, password: str, *, works: bool = True) -> None:
    """Until ``user`` logs in with SCRAM-SHA-256 (``works``), or no longer does: unrecorded, on a connection
    with a transcript of its own (the broker's credentials follow its image a moment later)."""
    def as_wanted() -> bool:
        probe = Side(side.name, side.host, side.port)
        try:
            answer = scram(probe, user, password)
            return (answer is not None and answer.error_code == 0) == works
        finally:
            probe.close()
    _wait(side, f"{user}'s SCRAM credential", as_wanted)


def alter_quotas(side: Side, version: int, *entries: tuple, validate_only: bool = False):
    """``entries``: ({entity type: name or None}, {key: value, or None to remove})."""
    return side.call("AlterClientQuotas", version, _quota_request(*entries, validate_only=validate_only))


def _quota_request(*entries: tuple, validate_only: bool):
    wanted = AlterClientQuotas.EntryData
    return request("AlterClientQuotas", validate_only=validate_only, entries=[
        wanted(entity=[wanted.EntityData(entity_type=kind, entity_name=name) for kind, name in entity.items()],
               ops=[wanted.OpData(key=key, value=0.0 if value is None else value, remove=value is None)
                    for key, value in ops.items()])
        for entity, ops in entries])


def describe_quotas(admin: Side, version: int, *components: tuple, strict: bool = False):
    """DescribeClientQuotas once the broker's image holds what was changed before."""
    wait_metadata_applied(admin)
    return describe_entities(admin, version, *components, strict=strict)


def describe_entities(side: Side, version: int, *components: tuple, strict: bool = False):
    """``components``: (entity type, match type, match)."""
    return side.call("DescribeClientQuotas", version, request("DescribeClientQuotas", strict=strict, components=[
        DescribeClientQuotas.ComponentData(entity_type=kind, match_type=match_type, match=match)
        for kind, match_type, match in components]))


# -- sessions ----------------------------------------------------------------------------------------------

def sasl_handshake_session(side: Side) -> None:
    """SaslHandshake at every version: each mechanism offered, one that is not (refused with the list, and
    the connection closed), a second handshake, a request before any; v0's bare PLAIN token."""
    for version in versions("SaslHandshake"):
        # admitted before a handshake (not recorded: its versions are the api_versions session's findings;
        # the handshake after it on the same connection is)
        side.call("ApiVersions", 3, request("ApiVersions", client_software_name="differential",
                                            client_software_version="1.0"), record=False)
        for mechanism in ("PLAIN", "SCRAM-SHA-256"):
            side.call("SaslHandshake", version, request("SaslHandshake", mechanism=mechanism))
            side.close()
        for mechanism in ("GSSAPI", "SCRAM-SHA-512", "plain", "", "OAUTHBEARER"):
            side.call("SaslHandshake", version, request("SaslHandshake", mechanism=mechanism))
            side.call("Metadata", 12, request("Metadata", topics=[]))  # closed: the refusal ended the connection
            side.close()
        side.call("SaslHandshake", version, request("SaslHandshake", mechanism="PLAIN"))
        side.call("SaslHandshake", version, request("SaslHandshake", mechanism="PLAIN"))  # a second one
        side.close()
        side.call("Metadata", 12, request("Metadata", topics=[]))  # before a handshake: closed
        side.close()
    # v0: the tokens follow as bare frames, without SaslAuthenticate
    for user, password in (("admin", USERS["admin"]), ("admin", "wrong"), ("nobody", "x")):
        side.call("SaslHandshake", 0, request("SaslHandshake", mechanism="PLAIN"))
        side.raw_frame(plain_token(user, password))
        side.call("Metadata", 12, request("Metadata", topics=[]))  # answered only when authenticated
        side.close()
    # after a v1 handshake, a bare token is not a request
    side.call("SaslHandshake", 1, request("SaslHandshake", mechanism="PLAIN"))
    side.raw_frame(plain_token("admin", USERS["admin"]))
    side.call("Metadata", 12, request("Metadata", topics=[]))
    side.close()


def sasl_authenticate_session(side: Side) -> None:
    """SaslAuthenticate at every version, PLAIN and SCRAM-SHA-256: good and bad passwords, unknown users,
    malformed tokens; an authenticated connection serves, a failed one is closed."""
    for version in versions("SaslAuthenticate"):
        plain(side, "alice", authenticate=version)
        side.call("Metadata", 12, request("Metadata", topics=[]))
        # once authenticated (no re-authentication configured): another authentication, another handshake
        side.call("SaslAuthenticate", version, request("SaslAuthenticate", auth_bytes=plain_token("alice", "x")))
        side.call("Metadata", 12, request("Metadata", topics=[]))
        side.call("SaslHandshake", 1, request("SaslHandshake", mechanism="PLAIN"))
        side.call("Metadata", 12, request("Metadata", topics=[]))
        side.close()
        for user, password in (("alice", "wrong"), ("nobody", "x"), ("alice", "")):
            plain(side, user, password, authenticate=version)
            side.call("Metadata", 12, request("Metadata", topics=[]))  # closed after the failure
            side.close()
        for token in (b"\0only-two", b"", b"alice\0alice\0alice-secret", b"bob\0alice\0alice-secret",
                      b"\0alice\0alice-secret\0extra", b"\xff\xfe\0a\0b"):
            side.call("SaslHandshake", 1, request("SaslHandshake", mechanism="PLAIN"))
            side.call("SaslAuthenticate", version, request("SaslAuthenticate", auth_bytes=token))
            side.call("Metadata", 12, request("Metadata", topics=[]))
            side.close()
        scram(side, "alice", authenticate=version)
        side.call("Metadata", 12, request("Metadata", topics=[]))
        side.close()
        for user, password, suffix in (("alice", "wrong", ""), ("nobody", "x", ""), ("bob", None, "tampered")):
            scram(side, user, password, authenticate=version, nonce_suffix=suffix)
            side.call("Metadata", 12, request("Metadata", topics=[]))
            side.close()
        for first in (b"garbage", b"n,,n=alice", b"y,,n=alice,r=abc", b"n,a=bob,n=alice,r=abc", b""):
            side.call("SaslHandshake", 1, request("SaslHandshake", mechanism="SCRAM-SHA-256"))
            side.call("SaslAuthenticate", version, request("SaslAuthenticate", auth_bytes=first))
            side.call("Metadata", 12, request("Metadata", topics=[]))
            side.close()


def scram_credentials_session(side: Side) -> None:
    """DescribeUserScramCredentials and AlterUserScramCredentials (every version both serve): the users made
    at start, upserts and deletes and what they change, every refusal; a user made here logs in with it;
    a user who is not a super user is refused."""
    with logged_in(side, "admin") as admin:
        describe_scram(admin, ["alice"])
        describe_scram(admin, ["alice", "bob"])
        describe_scram(admin, ["carol"])  # RESOURCE_NOT_FOUND
        describe_scram(admin, ["alice", "alice"])  # DUPLICATE_RESOURCE
        describe_scram(admin, ["bob", "carol", "bob"])
        describe_scram(admin, None)  # every user
        describe_scram(admin, [])  # no user named: every user too?
        alter_scram(admin, upsertions=[upsertion("carol", "carol-secret")])
        describe_scram(admin, ["carol"])
        alter_scram(admin, upsertions=[upsertion("carol", "carol-secret-2", iterations=8192)])  # replaced
        describe_scram(admin, ["carol"])
        alter_scram(admin, upsertions=[upsertion("dave", mechanism=SCRAM_SHA_512)])
        describe_scram(admin, ["dave"])
        alter_scram(admin, upsertions=[upsertion("erin", iterations=4095)])  # too few
        alter_scram(admin, upsertions=[upsertion("erin", iterations=16384)])  # the most Kafka takes
        alter_scram(admin, upsertions=[upsertion("frank", iterations=16385)])  # too many
        alter_scram(admin, upsertions=[upsertion("frank", mechanism=0)])  # UNKNOWN mechanism
        alter_scram(admin, upsertions=[upsertion("frank", mechanism=3)])
        alter_scram(admin, upsertions=[upsertion("", "x")])  # empty name
        alter_scram(admin, upsertions=[upsertion("grace", salt=b"")])  # empty salt
        alter_scram(admin, upsertions=[upsertion("heidi"), upsertion("heidi", "other")])  # one user twice
        alter_scram(admin, upsertions=[upsertion("heidi"), upsertion("heidi", mechanism=SCRAM_SHA_512)])
        alter_scram(admin, upsertions=[upsertion("ivan")], deletions=[deletion("ivan")])
        alter_scram(admin, deletions=[deletion("carol"), deletion("carol")])
        alter_scram(admin, deletions=[deletion("nobody")])  # RESOURCE_NOT_FOUND
        alter_scram(admin, deletions=[deletion("dave", SCRAM_SHA_256)])  # dave has SHA-512 only
        alter_scram(admin, deletions=[deletion("dave", 0)])
        alter_scram(admin, upsertions=[upsertion("judy"), upsertion("", "x")], deletions=[deletion("nobody")])
        describe_scram(admin, ["carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"])
        # carol logs in with the credential made here (the replaced one)
        wait_scram_login(side, "carol", "carol-secret-2")
        scram(side, "carol", "carol-secret")
        side.close()
        scram(side, "carol", "carol-secret-2")
        side.call("Metadata", 12, request("Metadata", topics=[]))
        side.close()
        alter_scram(admin, deletions=[deletion("carol"), deletion("dave", SCRAM_SHA_512)])
        describe_scram(admin, ["carol", "dave"])
        wait_scram_login(side, "carol", "carol-secret-2", works=False)
        scram(side, "carol", "carol-secret-2")  # no credential any more
        side.close()
        alter_scram(admin, deletions=[deletion(name) for name in ("erin", "grace", "judy")])
    with logged_in(side, "alice") as alice:  # no ALTER or DESCRIBE on the cluster
        describe_users(alice, ["alice"])
        alter_scram(alice, upsertions=[upsertion("mallory")])
        alter_scram(alice, deletions=[deletion("bob")])


# Filters with an UNKNOWN (0) resource type, pattern type, operation or permission
UNKNOWN_FILTERS = (acl(0, None, ANY, None, None, ANY, ANY), acl(TOPIC, None, 0, None, None, ANY, ANY),
                   acl(TOPIC, None, ANY, None, None, 0, ANY), acl(TOPIC, None, ANY, None, None, ANY, 0))


def acls_session(side: Side) -> None:
    """CreateAcls, DescribeAcls and DeleteAcls at every version: every resource type and both pattern types,
    every refusal, filters that match and that do not; a user who is not a super user is refused."""
    with logged_in(side, "admin") as admin:
        for version in versions("CreateAcls"):
            v = f"v{version}"
            create_acls(admin, version,
                        acl(TOPIC, f"acl-topic-{v}", LITERAL), acl(TOPIC, f"acl-tp-{v}", PREFIXED, operation=WRITE),
                        acl(GROUP, f"acl-group-{v}", LITERAL, "User:bob", operation=DESCRIBE),
                        acl(GROUP, f"acl-gp-{v}", PREFIXED, operation=ALL, permission=DENY),
                        acl(CLUSTER, "kafka-cluster", LITERAL, f"User:cluster-{v}", operation=IDEMPOTENT_WRITE),
                        acl(TRANSACTIONAL_ID, f"acl-txn-{v}", LITERAL, host="127.0.0.1", operation=WRITE),
                        acl(TRANSACTIONAL_ID, f"acl-tx-{v}", PREFIXED, operation=DESCRIBE),
                        acl(DELEGATION_TOKEN, f"acl-token-{v}", LITERAL, operation=DESCRIBE),
                        acl(USER, f"acl-user-{v}", LITERAL, operation=CREATE_TOKENS),
                        acl(USER, f"acl-up-{v}", PREFIXED, operation=DESCRIBE_TOKENS),
                        acl(TOPIC, "*", LITERAL, f"User:wild-{v}", operation=DESCRIBE_CONFIGS),
                        acl(TOPIC, f"acl-topic-{v}", LITERAL))  # the same binding twice
            # ANY (or MATCH) where a binding needs one value: each in a request of its own
            for binding in (acl(ANY, f"acl-bad-{v}", LITERAL), acl(TOPIC, f"acl-bad-{v}", ANY),
                            acl(TOPIC, f"acl-bad-{v}", MATCH), acl(TOPIC, f"acl-bad-{v}", LITERAL, operation=ANY),
                            acl(TOPIC, f"acl-bad-{v}", LITERAL, permission=ANY)):
                create_acls(admin, version, binding)
            # refused, or taken, each in a request of its own and all in one
            refused = [acl(TOPIC, "", LITERAL), acl(CLUSTER, "my-cluster", LITERAL, operation=ALTER),
                       acl(TOPIC, f"acl-bad-{v}", LITERAL, principal="alice"),
                       acl(TOPIC, f"acl-bad-{v}", LITERAL, principal=""),
                       acl(TOPIC, f"acl-bad-{v}", LITERAL, principal="Group:alice"),
                       acl(TOPIC, f"acl-bad-{v}", LITERAL, host=""),
                       acl(TOPIC, f"acl-bad-{v}", LITERAL, operation=IDEMPOTENT_WRITE),
                       acl(GROUP, f"acl-bad-{v}", LITERAL, operation=WRITE),
                       acl(TRANSACTIONAL_ID, f"acl-bad-{v}", LITERAL, operation=TWO_PHASE_COMMIT),
                       acl(TOPIC, f"acl-bad-{v}", LITERAL, operation=99)]
            for binding in refused:
                create_acls(admin, version, binding)
            create_acls(admin, version, *refused, acl(TOPIC, f"acl-mixed-{v}", LITERAL))
            # an UNKNOWN (0) resource type, pattern type, operation or permission: not a request Kafka takes
            for unknown in (acl(0, f"acl-bad-{v}", LITERAL), acl(TOPIC, f"acl-bad-{v}", 0),
                            acl(TOPIC, f"acl-bad-{v}", LITERAL, operation=0),
                            acl(TOPIC, f"acl-bad-{v}", LITERAL, permission=0)):
                with logged_in(side, "admin") as once:
                    create_acls(once, version, acl(TOPIC, f"acl-fine-{v}", LITERAL), unknown)
        for version in versions("DescribeAcls"):
            v = f"v{version}"
            for acl_filter in (
                    acl(TOPIC, f"acl-topic-{v}", LITERAL, None, None, ANY, ANY),  # exactly one
                    acl(TOPIC, f"acl-topic-{v}", ANY, None, None, ANY, ANY),
                    acl(TOPIC, f"acl-tp-{v}-orders", MATCH, None, None, ANY, ANY),  # the prefix and the wildcard
                    acl(ANY, f"acl-group-{v}", ANY, None, None, ANY, ANY),
                    acl(GROUP, None, PREFIXED, None, None, ANY, DENY),
                    acl(ANY, None, ANY, "User:bob", None, DESCRIBE, ANY),
                    acl(TRANSACTIONAL_ID, f"acl-txn-{v}", LITERAL, None, "127.0.0.1", ANY, ALLOW),
                    acl(USER, None, ANY, None, None, ANY, ANY),
                    acl(DELEGATION_TOKEN, None, ANY, None, None, ANY, ANY),
                    acl(CLUSTER, "kafka-cluster", LITERAL, f"User:cluster-{v}", None, ANY, ANY),
                    acl(TOPIC, "*", LITERAL, None, None, ANY, ANY),
                    acl(TOPIC, f"acl-topic-{v}", LITERAL, "User:bob", None, ANY, ANY),  # matches nothing
                    acl(TOPIC, f"acl-topic-{v}", LITERAL, None, None, WRITE, ANY),
                    acl(TOPIC, "acl-nothing", ANY, None, None, ANY, ANY),
                    acl(TOPIC, f"acl-topic-{v}", PREFIXED, None, None, ANY, ANY),
                    acl(TOPIC, None, MATCH, None, None, ANY, ANY),  # MATCH without a name
                    acl(TOPIC, None, ANY, None, None, TWO_PHASE_COMMIT, ANY),
                    acl(99, None, ANY, None, None, ANY, ANY), acl(TOPIC, None, 99, None, None, ANY, ANY)):
                describe_acls(admin, version, acl_filter)
            for unknown in UNKNOWN_FILTERS:
                with logged_in(side, "admin") as once:
                    describe_bindings(once, version, unknown)
        for version in versions("DeleteAcls"):
            v = f"v{version}"
            delete_acls(admin, version, acl(TOPIC, f"acl-topic-{v}", LITERAL, None, None, ANY, ANY),
                        acl(TOPIC, f"acl-topic-{v}", LITERAL, None, None, ANY, ANY),  # already gone
                        acl(GROUP, "acl-nothing", ANY, None, None, ANY, ANY))
            delete_acls(admin, version, acl(TOPIC, f"acl-tp-{v}-x", MATCH, None, None, ANY, ANY),
                        acl(ANY, None, ANY, f"User:cluster-{v}", None, ANY, ANY),
                        acl(99, None, ANY, None, None, ANY, ANY), acl(TOPIC, None, ANY, None, None, 99, ANY))
            for unknown in UNKNOWN_FILTERS:
                with logged_in(side, "admin") as once:
                    delete_acls(once, version, acl(TOPIC, f"acl-fine-{v}", ANY, None, None, ANY, ANY), unknown)
            delete_acls(admin, version, acl(GROUP, "acl-g", PREFIXED, None, None, ANY, ANY))  # not a stored prefix
            left = ((GROUP, "group", LITERAL), (GROUP, "gp", PREFIXED), (TRANSACTIONAL_ID, "txn", LITERAL),
                    (TRANSACTIONAL_ID, "tx", PREFIXED), (DELEGATION_TOKEN, "token", LITERAL), (USER, "user", LITERAL),
                    (USER, "up", PREFIXED), (TOPIC, "mixed", LITERAL), (TOPIC, "fine", LITERAL))
            delete_acls(admin, version, *(acl(kind, f"acl-{name}-{v}", pattern, None, None, ANY, ANY)
                                          for kind, name, pattern in left))
            describe_acls(admin, version, acl(ANY, None, ANY, None, None, ANY, ANY))  # what is left
        delete_acls(admin, 3, acl(TOPIC, "*", LITERAL, None, None, ANY, ANY))
        describe_acls(admin, 3, acl(ANY, None, ANY, None, None, ANY, ANY))  # none
    with logged_in(side, "alice") as alice:  # no ALTER or DESCRIBE on the cluster
        create_acls(alice, 3, acl(TOPIC, "acl-alice", LITERAL))
        describe_bindings(alice, 3, acl(ANY, None, ANY, None, None, ANY, ANY))
        delete_acls(alice, 3, acl(ANY, None, ANY, None, None, ANY, ANY))
    with logged_in(side, "alice") as alice:  # an UNKNOWN element is refused before authorization
        create_acls(alice, 3, acl(0, "acl-alice", LITERAL))


def client_quotas_session(side: Side) -> None:
    """AlterClientQuotas and DescribeClientQuotas at every version: user, client-id, both, their defaults
    and ip entities; every refusal of a key, a value, an entity or a filter; validate_only."""
    user, client = "user", "client-id"
    with logged_in(side, "admin") as admin:
        for version in versions("AlterClientQuotas"):
            v = f"v{version}"
            alter_quotas(admin, version, ({user: f"q-user-{v}"}, {"producer_byte_rate": 1024.0}),
                         ({client: f"q-client-{v}"}, {"consumer_byte_rate": 2048.0}),
                         ({user: f"q-both-{v}", client: f"q-both-{v}"}, {"request_percentage": 50.0}),
                         ({"ip": "10.0.0.1" if version == 0 else "10.0.0.2"}, {"connection_creation_rate": 7.0}))
            describe_quotas(admin, version, (user, EXACT, f"q-user-{v}"))
            describe_quotas(admin, version, (client, EXACT, f"q-client-{v}"), strict=True)
            describe_quotas(admin, version, (user, EXACT, f"q-both-{v}"), (client, EXACT, f"q-both-{v}"))
            describe_quotas(admin, version, (user, EXACT, f"q-both-{v}"), strict=True)  # strict: not user alone
            alter_quotas(admin, version, ({user: f"q-user-{v}"}, {"producer_byte_rate": 4096.0,
                                                                  "controller_mutation_rate": 10.0}))
            describe_quotas(admin, version, (user, EXACT, f"q-user-{v}"), strict=True)
            alter_quotas(admin, version, ({user: f"q-user-{v}"}, {"producer_byte_rate": None}))  # removed
            describe_quotas(admin, version, (user, EXACT, f"q-user-{v}"))
            alter_quotas(admin, version, ({user: f"q-valid-{v}"}, {"producer_byte_rate": 1.0}), validate_only=True)
            describe_quotas(admin, version, (user, EXACT, f"q-valid-{v}"))  # nothing: validate_only
            for entity, ops in (({user: "q-bad"}, {"no.such.quota": 1.0}),
                                ({user: "q-bad"}, {"connection_creation_rate": 1.0}),  # an ip's key
                                ({"ip": "10.0.0.9"}, {"producer_byte_rate": 1.0}),  # a user's key
                                ({user: "q-bad"}, {"producer_byte_rate": -1.0}),
                                ({user: "q-bad"}, {"producer_byte_rate": 0.0}),
                                ({user: "q-bad"}, {"producer_byte_rate": 1.5}),  # a rate of bytes is whole
                                ({user: "q-bad"}, {"request_percentage": 0.5}),
                                ({user: "q-bad"}, {"producer_byte_rate": float("nan")}),
                                ({user: "q-bad"}, {"producer_byte_rate": float("inf")}),
                                ({user: "q-bad"}, {"producer_byte_rate": 1e20}),
                                ({user: ""}, {"producer_byte_rate": 1.0}),
                                ({"ip": "not-an-ip"}, {"connection_creation_rate": 1.0}),
                                ({"ip": "10.0.0.9", user: "q-bad"}, {"connection_creation_rate": 1.0}),
                                ({"group": "q-bad"}, {"producer_byte_rate": 1.0}),
                                ({}, {"producer_byte_rate": 1.0}),
                                ({user: "q-nothing"}, {"producer_byte_rate": None}),  # removing what is not set
                                ({user: "q-bad"}, {})):
                alter_quotas(admin, version, (entity, ops))
                alter_quotas(admin, version, (entity, ops), validate_only=True)
            # one good and one bad entity in one request
            alter_quotas(admin, version, ({user: f"q-mixed-{v}"}, {"consumer_byte_rate": 100.0}),
                         ({user: "q-bad"}, {"no.such.quota": 1.0}))
            describe_quotas(admin, version, (user, EXACT, f"q-mixed-{v}"))
        # the defaults: <default> user, <default> client id, and a user's default client id
        alter_quotas(admin, 1, ({user: None}, {"producer_byte_rate": 1_000_000.0}),
                     ({client: None}, {"consumer_byte_rate": 2_000_000.0}),
                     ({user: "q-default", client: None}, {"request_percentage": 200.0}),
                     ({"ip": None}, {"connection_creation_rate": 100.0}))
        for version in versions("DescribeClientQuotas"):
            describe_quotas(admin, version, (user, DEFAULT, None))
            describe_quotas(admin, version, (client, DEFAULT, None), strict=True)
            describe_quotas(admin, version, (user, EXACT, "q-default"), (client, DEFAULT, None))
            describe_quotas(admin, version, ("ip", DEFAULT, None))
            describe_quotas(admin, version, ("ip", EXACT, "10.0.0.1"))
            describe_quotas(admin, version, (user, EXACT, "q-nobody"))  # matches nothing
            describe_quotas(admin, version, (user, SPECIFIED, None), (client, SPECIFIED, None))
            describe_quotas(admin, version, ("ip", SPECIFIED, None))
            for components in (((user, EXACT, None),), ((user, DEFAULT, "x"),), ((user, SPECIFIED, "x"),),
                               ((user, 7, None),), (("", EXACT, "x"),), (("group", EXACT, "x"),),
                               ((user, EXACT, "a"), (user, EXACT, "b")),
                               (("ip", EXACT, "10.0.0.1"), (user, SPECIFIED, None))):
                describe_quotas(admin, version, *components)
        # removed again, the entity with them
        alter_quotas(admin, 1, ({user: None}, {"producer_byte_rate": None}),
                     ({client: None}, {"consumer_byte_rate": None}),
                     ({user: "q-default", client: None}, {"request_percentage": None}),
                     ({"ip": None}, {"connection_creation_rate": None}))
        describe_quotas(admin, 1, (user, DEFAULT, None))
    with logged_in(side, "alice") as alice:  # no ALTER_CONFIGS or DESCRIBE_CONFIGS on the cluster
        describe_entities(alice, 1, (user, SPECIFIED, None))
        alter_quotas(alice, 1, ({user: "alice"}, {"producer_byte_rate": 1.0}))


AUTHZ_TOPIC, AUTHZ_GROUP, AUTHZ_TXN = "authz-topic", "authz-group", "authz-txn"
AUTHZ_DOOMED = "authz-doomed"  # the topic bob is to delete
AUTHZ_JOINED = {version: f"{AUTHZ_GROUP}-join-v{version}" for version in (1, 9)}  # a second member would wait


def authorization_session(side: Side) -> None:
    """What bob (logged in with SCRAM), who has no ACL, is refused on a topic, a group, a transactional id
    and the cluster, API by API; then what he is refused with DESCRIBE on the topic alone; then the ACLs
    each request needs are granted and the same requests succeed; a DENY overrides an ALLOW."""
    with logged_in(side, "admin") as admin, logged_in(side, "bob", mechanism="SCRAM-SHA-256") as bob:
        create_topics(admin, 7, (AUTHZ_TOPIC, 1, 1), (AUTHZ_DOOMED, 1, 1))
        wait_serving(admin, AUTHZ_TOPIC, 1)
        wait_led(admin, AUTHZ_DOOMED)
        produce(admin, 9, AUTHZ_TOPIC, 0, values(b"first"))
        topic_id = metadata(admin, 12, [AUTHZ_TOPIC], record=False).topics[0].topic_id
        for group in (AUTHZ_GROUP, *AUTHZ_JOINED.values()):
            wait_coordinator(admin, group, 0)
        wait_coordinator(admin, AUTHZ_TXN, 1)
        wait_producer_ids(admin)
        bob_asks(bob, topic_id)  # refused, all of it
        grant(admin, acl(TOPIC, AUTHZ_TOPIC, LITERAL, "User:bob", operation=DESCRIBE))
        bob_asks(bob, topic_id)  # described, not read or written
        grant(admin, acl(TOPIC, AUTHZ_TOPIC, LITERAL, "User:bob", operation=WRITE),
              acl(TOPIC, AUTHZ_TOPIC, LITERAL, "User:bob", operation=READ),
              acl(TOPIC, "authz-", PREFIXED, "User:bob", operation=CREATE),
              acl(TOPIC, AUTHZ_DOOMED, LITERAL, "User:bob", operation=DELETE),
              acl(GROUP, AUTHZ_GROUP, PREFIXED, "User:bob", operation=READ),
              acl(TRANSACTIONAL_ID, AUTHZ_TXN, LITERAL, "User:bob", operation=WRITE),
              acl(TOPIC, AUTHZ_TOPIC, LITERAL, "User:bob", operation=DESCRIBE_CONFIGS),
              acl(CLUSTER, "kafka-cluster", LITERAL, "User:bob", operation=ALTER),
              acl(CLUSTER, "kafka-cluster", LITERAL, "User:bob", operation=DESCRIBE_CONFIGS),
              acl(CLUSTER, "kafka-cluster", LITERAL, "User:bob", operation=IDEMPOTENT_WRITE))
        bob_asks(bob, topic_id, granted=True)
        grant(admin, acl(TOPIC, "authz-t", PREFIXED, "User:*", operation=WRITE, permission=DENY))
        produce(bob, 9, AUTHZ_TOPIC, 0, values(b"denied"))
        metadata(bob, 12, [AUTHZ_TOPIC])
        delete_acls(admin, 3, acl(ANY, None, ANY, "User:bob", None, ANY, ANY),
                    acl(ANY, None, ANY, "User:*", None, ANY, ANY))


def bob_asks(bob: Side, topic_id, *, granted: bool = False) -> None:
    """Every request of the authorization session, as bob, at a few versions each."""
    for version in (1, 4, 8, 12):
        bob.call("Metadata", version, request(
            "Metadata", topics=[API_BY_NAME["Metadata"].request_class.MetadataRequestTopic(name=AUTHZ_TOPIC)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=version >= 8))
    metadata(bob, 12, None)  # every topic: the unauthorized ones left out
    if not granted:  # once bob may create it, kbroker creates it at once and Kafka a moment later
        metadata(bob, 12, ["authz-unknown"], auto_create=True)
    for version in (3, 9, 12):
        produce(bob, version, AUTHZ_TOPIC, 0, values(b"bob"))
    for version in (4, 12, 17):  # by name, then by topic id
        bob.call("Fetch", version, request(
            "Fetch", replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[Fetch.FetchTopic(topic=AUTHZ_TOPIC, topic_id=topic_id, partitions=[
                Fetch.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                                current_leader_epoch=-1, log_start_offset=-1,
                                                last_fetched_epoch=-1)])]))
    listing = ListOffsets.ListOffsetsTopic
    for version in (1, 7, 10):
        bob.call("ListOffsets", version, request("ListOffsets", replica_id=-1, isolation_level=0, topics=[listing(
            name=AUTHZ_TOPIC, partitions=[listing.ListOffsetsPartition(partition_index=0, timestamp=-1,
                                                                       current_leader_epoch=-1)])]))
    for version in (2, 7):
        create_topics(bob, version, ("authz-bob-topic", 1, 1))
    bob.call("DeleteTopics", 1, request("DeleteTopics", timeout_ms=30000, topic_names=[AUTHZ_DOOMED]))
    bob.call("DeleteTopics", 6, request("DeleteTopics", timeout_ms=30000,
                                        topics=[DeleteTopics.DeleteTopicState(name=AUTHZ_DOOMED)]))
    for version in (1, 3, 4, 6):
        for key, key_type in ((AUTHZ_GROUP, 0), (AUTHZ_TXN, 1)):
            body = (request("FindCoordinator", key=key, key_type=key_type) if version < 4
                    else request("FindCoordinator", key_type=key_type, coordinator_keys=[key]))
            bob.call("FindCoordinator", version, body)
    for version, group in AUTHZ_JOINED.items():
        bob.call("JoinGroup", version, request(
            "JoinGroup", group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id="",
            group_instance_id="authz-instance" if version >= 5 else None, protocol_type="consumer",
            protocols=[JoinGroup.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)]))
    committed = OffsetCommit.OffsetCommitRequestTopic
    for version in (2, 8):
        bob.call("OffsetCommit", version, request(
            "OffsetCommit", group_id=AUTHZ_GROUP, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
            topics=[committed(name=AUTHZ_TOPIC, partitions=[committed.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_metadata="bob")])]))
    for version in (1, 7):
        bob.call("OffsetFetch", version, request("OffsetFetch", group_id=AUTHZ_GROUP, topics=[
            OffsetFetch.OffsetFetchRequestTopic(name=AUTHZ_TOPIC, partition_indexes=[0])]))
    fetched = OffsetFetch.OffsetFetchRequestGroup
    bob.call("OffsetFetch", 8, request("OffsetFetch", groups=[fetched(group_id=AUTHZ_GROUP, topics=[
        fetched.OffsetFetchRequestTopics(name=AUTHZ_TOPIC, partition_indexes=[0])])]))
    for version, transactional_id in ((0, AUTHZ_TXN), (5, AUTHZ_TXN), (5, None)):  # the last: idempotent
        bob.call("InitProducerId", version, request("InitProducerId", transactional_id=transactional_id,
                                                    transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1))
    wanted = DescribeConfigs.DescribeConfigsResource
    for version in (1, 4):
        bob.call("DescribeConfigs", version, request("DescribeConfigs", include_synonyms=False, resources=[
            wanted(resource_type=2, resource_name=AUTHZ_TOPIC, configuration_keys=["cleanup.policy"]),
            wanted(resource_type=4, resource_name="1", configuration_keys=["log.retention.hours"])]))
    create_acls(bob, 3, acl(TOPIC, "authz-by-bob", LITERAL, "User:bob"))


SESSIONS = [sasl_handshake_session, sasl_authenticate_session, scram_credentials_session, acls_session,
            client_quotas_session, authorization_session]
