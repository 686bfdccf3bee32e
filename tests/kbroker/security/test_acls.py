"""Kafka's ACL rules (kbroker/security/acls.py): table cases for each rule, and the indexed
authorizer against a brute-force reading of the same rules over random ACL sets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.security.acls import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, Authorizer,
                                   PatternType, ResourceType, validate_binding, validate_filter)
from kbroker.wire.errors import ErrorCode

O, P, R, T = AclOperation, AclPermissionType, ResourceType, PatternType
ALLOW, DENY = P.ALLOW, P.DENY


def acl(name="orders", operation=O.READ, permission=ALLOW, principal="User:alice", host="*", pattern=T.LITERAL,
        kind=R.TOPIC) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, host, operation, permission)


CASES = [
    # (acls, principal, host, operation, resource name, allowed)
    ([], "User:alice", "1.2.3.4", O.READ, "orders", False),
    ([acl()], "User:alice", "1.2.3.4", O.READ, "orders", True),
    ([acl()], "User:bob", "1.2.3.4", O.READ, "orders", False),
    ([acl(principal="User:*")], "User:bob", "1.2.3.4", O.READ, "orders", True),
    ([acl(host="10.0.0.1")], "User:alice", "1.2.3.4", O.READ, "orders", False),
    ([acl(host="10.0.0.1")], "User:alice", "10.0.0.1", O.READ, "orders", True),
    ([acl(), acl(permission=DENY)], "User:alice", "h", O.READ, "orders", False),  # DENY wins
    ([acl(), acl(permission=DENY, principal="User:*")], "User:alice", "h", O.READ, "orders", False),
    ([acl(operation=O.ALL)], "User:alice", "h", O.DELETE, "orders", True),
    ([acl(operation=O.ALL, permission=DENY), acl(operation=O.WRITE)], "User:alice", "h", O.WRITE, "orders", False),
    ([acl(operation=O.WRITE)], "User:alice", "h", O.DESCRIBE, "orders", True),  # WRITE implies DESCRIBE
    ([acl(operation=O.DELETE)], "User:alice", "h", O.DESCRIBE, "orders", True),
    ([acl(operation=O.ALTER_CONFIGS)], "User:alice", "h", O.DESCRIBE_CONFIGS, "orders", True),
    ([acl(operation=O.DESCRIBE)], "User:alice", "h", O.READ, "orders", False),  # no implication upwards
    ([acl(operation=O.DESCRIBE), acl(operation=O.READ, permission=DENY)], "User:alice", "h", O.DESCRIBE,
     "orders", True),  # a denial implies nothing
    ([acl(name="*")], "User:alice", "h", O.READ, "anything", True),
    ([acl(name="ord", pattern=T.PREFIXED)], "User:alice", "h", O.READ, "orders", True),
    ([acl(name="ord", pattern=T.PREFIXED)], "User:alice", "h", O.READ, "or", False),
    ([acl(name="ord", pattern=T.LITERAL)], "User:alice", "h", O.READ, "orders", False),
    ([acl(), acl(name="or", pattern=T.PREFIXED, permission=DENY)], "User:alice", "h", O.READ, "orders", False),
    ([acl(name="other")], "User:alice", "h", O.READ, "orders", False),
    ([acl(kind=R.GROUP, name="orders")], "User:alice", "h", O.READ, "orders", False),  # another type
]


@pytest.mark.parametrize("acls, principal, host, operation, name, allowed", CASES)
def test_rules(acls, principal, host, operation, name, allowed):
    assert Authorizer(acls).authorize(principal, host, operation, R.TOPIC, name) is allowed


def test_super_users_and_the_no_acl_default():
    deny_all = [acl(operation=O.ALL, permission=DENY, principal="User:*")]
    assert Authorizer(deny_all, super_users=frozenset({"User:root"})).authorize("User:root", "h", O.WRITE, R.TOPIC,
                                                                                "orders")
    assert Authorizer([], allow_everyone_if_no_acl_found=True).authorize("User:x", "h", O.WRITE, R.TOPIC, "orders")
    # Once any ACL names the resource, the default no longer applies, whoever the ACL is for.
    assert not Authorizer([acl(principal="User:bob")], allow_everyone_if_no_acl_found=True).authorize(
        "User:x", "h", O.WRITE, R.TOPIC, "orders")
    assert Authorizer([acl(name="elsewhere")], allow_everyone_if_no_acl_found=True).authorize(
        "User:x", "h", O.WRITE, R.TOPIC, "orders")


def test_authorized_operations_bit_fields():
    authorizer = Authorizer([acl(operation=O.WRITE), acl(kind=R.GROUP, name="g", operation=O.READ),
                             acl(kind=R.CLUSTER, name="kafka-cluster", operation=O.ALL)])
    bits = authorizer.authorized_operations("User:alice", "h", R.TOPIC, "orders")
    assert bits == (1 << O.WRITE) | (1 << O.DESCRIBE)
    assert authorizer.authorized_operations("User:alice", "h", R.GROUP, "g") == (1 << O.READ) | (1 << O.DESCRIBE)
    cluster = authorizer.authorized_operations("User:alice", "h", R.CLUSTER, "kafka-cluster")
    assert cluster == sum(1 << op for op in (O.CREATE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS,
                                             O.IDEMPOTENT_WRITE, O.ALTER, O.DESCRIBE))


def test_authorize_any_resource_of_a_type():
    def any_write(acls, **options):
        return Authorizer(acls, **options).authorize_any("User:alice", "h", O.WRITE, R.TOPIC)
    assert not any_write([])
    assert any_write([], allow_everyone_if_no_acl_found=True)
    assert any_write([acl(operation=O.WRITE)])
    assert any_write([acl(operation=O.WRITE, name="a", pattern=T.PREFIXED)])
    assert not any_write([acl(operation=O.WRITE), acl(operation=O.WRITE, permission=DENY)])
    assert not any_write([acl(operation=O.WRITE), acl(name="*", operation=O.WRITE, permission=DENY)])
    assert not any_write([acl(operation=O.WRITE), acl(name="or", operation=O.WRITE, permission=DENY,
                                                      pattern=T.PREFIXED)])
    assert any_write([acl(operation=O.WRITE), acl(name="x", operation=O.WRITE, permission=DENY)])
    assert any_write([], super_users=frozenset({"User:alice"}))


@pytest.mark.parametrize("binding, message", [
    (acl(kind=R.ANY), "resourceType"), (acl(pattern=T.MATCH), "patternType"), (acl(operation=O.ANY), "operation"),
    (acl(permission=P.ANY), "permissionType"), (acl(name=""), "empty"), (acl(principal="alice"), "principal"),
    (acl(kind=R.CLUSTER, name="other", operation=O.ALTER), "kafka-cluster"), (acl(host=""), "Host"),
])
def test_create_refuses_malformed_bindings(binding, message):
    code, text = validate_binding(binding)
    assert code == ErrorCode.INVALID_REQUEST and message in text


def test_valid_bindings_pass():
    assert validate_binding(acl()) is None
    assert validate_binding(acl(kind=R.CLUSTER, name="kafka-cluster", operation=O.IDEMPOTENT_WRITE)) is None
    assert validate_binding(acl(operation=O.ALL, pattern=T.PREFIXED)) is None
    # any operation with any resource type, as Kafka 4.4's controller takes them
    assert validate_binding(acl(kind=R.GROUP, name="g", operation=O.WRITE)) is None
    assert validate_binding(acl(kind=R.TRANSACTIONAL_ID, name="t", operation=O.TWO_PHASE_COMMIT)) is None


def test_filters():
    literal, wildcard, prefixed = acl(name="orders"), acl(name="*"), acl(name="ord", pattern=T.PREFIXED)
    other = acl(name="other", permission=DENY, principal="User:bob")
    every = [literal, wildcard, prefixed, other]
    def matching(**fields):
        return [b for b in every if AclBindingFilter(**fields).matches(b)]
    assert matching() == every
    assert matching(resource_name="orders", pattern_type=T.MATCH) == [literal, wildcard, prefixed]
    assert matching(resource_name="orders", pattern_type=T.ANY) == [literal]
    assert matching(resource_name="ord", pattern_type=T.PREFIXED) == [prefixed]
    assert matching(resource_name="ord", pattern_type=T.LITERAL) == []
    assert matching(principal="User:bob") == [other]
    assert matching(permission_type=DENY) == [other]
    assert matching(resource_type=R.GROUP) == []
    assert validate_filter(AclBindingFilter(operation=O.UNKNOWN))[0] == ErrorCode.INVALID_REQUEST
    assert validate_filter(AclBindingFilter()) is None


# -- the index against a brute-force reading of the rules -------------------------------------------------

NAMES = ["a", "ab", "abc", "b", "*"]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]
OPERATIONS = [O.READ, O.WRITE, O.DESCRIBE, O.ALL, O.ALTER_CONFIGS, O.DESCRIBE_CONFIGS, O.DELETE]
BINDINGS = st.builds(
    AclBinding, st.sampled_from([R.TOPIC, R.GROUP]), st.sampled_from(NAMES), st.sampled_from([T.LITERAL, T.PREFIXED]),
    st.sampled_from(PRINCIPALS), st.sampled_from(["*", "h1", "h2"]), st.sampled_from(OPERATIONS),
    st.sampled_from([ALLOW, DENY]))
IMPLIED = {O.DESCRIBE: {O.READ, O.WRITE, O.DELETE, O.ALTER}, O.DESCRIBE_CONFIGS: {O.ALTER_CONFIGS}}


def reference(bindings, principal, host, operation, kind, name, allow_if_none) -> bool:
    def applies(b):
        if b.resource_type != kind:
            return False
        if b.pattern_type == T.LITERAL:
            return b.resource_name in (name, "*")
        return name.startswith(b.resource_name)
    applying = [b for b in bindings if applies(b)]
    if not applying:
        return allow_if_none
    mine = [b for b in applying if b.principal in (principal, "User:*") and b.host in (host, "*")]
    if any(b.permission_type == DENY and b.operation in (operation, O.ALL) for b in mine):
        return False
    return any(b.permission_type == ALLOW and (b.operation in (operation, O.ALL) or b.operation in IMPLIED.get(
        operation, ())) for b in mine)


@settings(max_examples=400, deadline=None)
@given(st.lists(BINDINGS, max_size=12), st.sampled_from(["User:alice", "User:bob"]), st.sampled_from(["h1", "h2"]),
       st.sampled_from(OPERATIONS[:3] + OPERATIONS[4:]), st.sampled_from([R.TOPIC, R.GROUP]),
       st.sampled_from(["a", "ab", "abc", "abd", "b", "c"]), st.booleans())
def test_authorizer_agrees_with_brute_force(bindings, principal, host, operation, kind, name, allow_if_none):
    authorizer = Authorizer(bindings, allow_everyone_if_no_acl_found=allow_if_none)
    assert authorizer.authorize(principal, host, operation, kind, name) == reference(
        bindings, principal, host, operation, kind, name, allow_if_none)
