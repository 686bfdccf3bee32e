"""Kafka's ACL model and the rules its StandardAuthorizer decides by (KIP-290, KIP-430, KIP-679).

An ACL binding names a resource pattern (type, name, LITERAL or PREFIXED; the
literal name ``*`` matches every resource of the type) and an entry
(principal, host, operation, ALLOW or DENY). A request is allowed when its
principal is a super user, or when no ACL names the resource at all and
``allow.everyone.if.no.acl.found`` is set, or when an ALLOW entry matches and
no DENY does: DENY wins. ALLOW of READ, WRITE, DELETE or ALTER implies
DESCRIBE; ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS; denials imply
nothing. Sans-IO: the broker builds an :class:`Authorizer` from the metadata
image's ACLs and asks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable

from kbroker.wire.errors import ErrorCode


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15  # KIP-939: a transactional id's two-phase commit


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

_O = AclOperation
# What each resource type's ACLs can grant (Kafka's AclEntry.supportedOperations); ALL goes with each.
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS,
                         _O.ALTER_CONFIGS),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),  # configs: KIP-848
    ResourceType.CLUSTER: (_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE,
                           _O.ALTER, _O.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}
# An ALLOW of the key grants the operations of the value too.
_IMPLIED_BY = {_O.DESCRIBE: (_O.READ, _O.WRITE, _O.DELETE, _O.ALTER), _O.DESCRIBE_CONFIGS: (_O.ALTER_CONFIGS,)}


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls match: ANY (or None for the strings) matches every value."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return (self.resource_type in (ResourceType.ANY, binding.resource_type)
                and self._pattern_matches(binding)
                and self.principal in (None, binding.principal)
                and self.host in (None, binding.host)
                and self.operation in (AclOperation.ANY, binding.operation)
                and self.permission_type in (AclPermissionType.ANY, binding.permission_type))

    def _pattern_matches(self, binding: AclBinding) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            # Every binding that applies to the resource ``name``: literal (or wildcard) and prefixed.
            if name is None:
                return True
            if binding.pattern_type == PatternType.LITERAL:
                return binding.resource_name in (name, WILDCARD)
            return binding.pattern_type == PatternType.PREFIXED and name.startswith(binding.resource_name)
        if self.pattern_type not in (PatternType.ANY, binding.pattern_type):
            return False
        return name is None or name == binding.resource_name


def validate_binding(binding: AclBinding) -> tuple[int, str] | None:
    """What CreateAcls refuses (INVALID_REQUEST with Kafka's reason), or None."""
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return ErrorCode.INVALID_REQUEST, "Invalid resourceType " + binding.resource_type.name
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return ErrorCode.INVALID_REQUEST, "Invalid patternType " + binding.pattern_type.name
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return ErrorCode.INVALID_REQUEST, "Invalid operation " + binding.operation.name
    if binding.permission_type in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
        return ErrorCode.INVALID_REQUEST, "Invalid permissionType " + binding.permission_type.name
    if not binding.resource_name:
        return ErrorCode.INVALID_REQUEST, "Resource name should not be empty"
    kind, colon, name = binding.principal.partition(":")
    if not colon or not kind or not name:
        return ErrorCode.INVALID_REQUEST, f"Could not parse principal from `{binding.principal}` (no colon is present " \
                                          "separating the principal type from the principal name)"
    if not binding.host:
        return ErrorCode.INVALID_REQUEST, "Host should not be empty"
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return ErrorCode.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    # Any operation goes with any resource type, as Kafka's KRaft controller takes it (WRITE on a group,
    # say): one that no request asks for on that type is an ACL that never decides anything.
    return None


def has_unknown(*codes: int) -> bool:
    """Whether a resource type, pattern type, operation or permission code is UNKNOWN (0): Kafka refuses
    such a CreateAcls, DescribeAcls or DeleteAcls request as it parses it, closing the connection."""
    return 0 in codes


def validate_filter(acl_filter: AclBindingFilter) -> tuple[int, str] | None:
    """A filter naming an UNKNOWN value matches nothing knowable: Kafka refuses it."""
    for value in (acl_filter.resource_type, acl_filter.pattern_type, acl_filter.operation,
                  acl_filter.permission_type):
        if value == 0:
            return ErrorCode.INVALID_REQUEST, f"The filter has an UNKNOWN {type(value).__name__}"
    return None


class _ResourceAcls:
    """The bindings of one resource type, indexed for lookups by resource name."""

    def __init__(self) -> None:
        self.literal: dict[str, list[AclBinding]] = {}
        self.prefixed: dict[str, list[AclBinding]] = {}

    def add(self, binding: AclBinding) -> None:
        index = self.literal if binding.pattern_type == PatternType.LITERAL else self.prefixed
        index.setdefault(binding.resource_name, []).append(binding)

    def applying_to(self, name: str) -> list[AclBinding]:
        """Every binding that names the resource: literally, by the wildcard, or by a prefix of its name."""
        found = [*self.literal.get(name, ()), *(self.literal.get(WILDCARD, ()) if name != WILDCARD else ())]
        if self.prefixed:
            for end in range(1, len(name) + 1):
                found += self.prefixed.get(name[:end], ())
        return found

    def all(self) -> Iterable[AclBinding]:
        for bindings in (*self.literal.values(), *self.prefixed.values()):
            yield from bindings


class Authorizer:
    """Decisions over a fixed set of ACLs (built anew when the metadata's ACLs change)."""

    def __init__(self, bindings: Iterable[AclBinding], super_users: frozenset[str] = frozenset(),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._by_type: dict[ResourceType, _ResourceAcls] = {}
        for binding in bindings:
            self._by_type.setdefault(binding.resource_type, _ResourceAcls()).add(binding)

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self._by_type.get(resource_type)
        applying = acls.applying_to(name) if acls is not None else []
        if not applying:
            return self.allow_everyone_if_no_acl_found
        allowed = False
        for binding in applying:
            if not _entry_matches(binding, principal, host):
                continue
            if binding.permission_type == AclPermissionType.DENY:
                if binding.operation in (operation, AclOperation.ALL):
                    return False
            elif binding.operation in (operation, AclOperation.ALL) or \
                    binding.operation in _IMPLIED_BY.get(operation, ()):
                allowed = True
        return allowed

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field: bit ``op`` set for each operation of the type the principal may do."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    def authorize_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether some resource of the type would allow ``operation`` (KIP-679's authorizeByResourceType):
        an ALLOW that no DENY of the same scope or wider covers."""
        if principal in self.super_users:
            return True
        acls = self._by_type.get(resource_type)
        if acls is None:
            return self.allow_everyone_if_no_acl_found
        matching = [b for b in acls.all() if _entry_matches(b, principal, host)
                    and b.operation in (operation, AclOperation.ALL)]
        denied_literals = {b.resource_name for b in matching
                           if b.permission_type == AclPermissionType.DENY and b.pattern_type == PatternType.LITERAL}
        if WILDCARD in denied_literals:
            return False
        denied_prefixes = [b.resource_name for b in matching
                           if b.permission_type == AclPermissionType.DENY and b.pattern_type == PatternType.PREFIXED]
        for binding in matching:
            if binding.permission_type != AclPermissionType.ALLOW:
                continue
            name = binding.resource_name
            if any(name.startswith(prefix) for prefix in denied_prefixes):
                continue
            if binding.pattern_type == PatternType.PREFIXED or name not in denied_literals:
                return True
        return False


def _entry_matches(binding: AclBinding, principal: str, host: str) -> bool:
    return binding.principal in (principal, WILDCARD_PRINCIPAL) and binding.host in (host, WILDCARD)
