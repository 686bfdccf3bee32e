"""The broker's authorizer: ACLs from the metadata image, checked the way handlers ask.

``authorizer.class.name`` empty (the default) means no authorizer: every
request is allowed and KIP-430 fields list every operation, as on a Kafka
broker without one. Set to Kafka's StandardAuthorizer (or AclAuthorizer, or
our own name), the ACLs in the metadata log decide, with ``super.users`` and
``allow.everyone.if.no.acl.found`` as Kafka's. The index over the ACLs is
rebuilt only when they change.

Handlers call the module functions with the node they were given, which has an
``authorization``: a controller's is off (``Authorization()``), since what reaches
its listener is forwarded admin requests, already authorized by the broker that
took them, and the nodes' own requests.
"""

from __future__ import annotations

from kbroker.config import BrokerConfig, ConfigError
from kbroker.effects import CoordinatorError
from kbroker.security.acls import AclBinding, AclOperation, AclPermissionType, Authorizer, PatternType, ResourceType
from kbroker.wire.errors import ErrorCode

AUTHORIZER_NAMES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer",
                    "kbroker.security.Authorizer")
CLUSTER = "kafka-cluster"
ALL_OPERATIONS = -2147483648  # KIP-430's "not asked for" marker in responses
# Kafka's messages of the authorization errors (Errors.message()), for the answers that carry one.
REFUSAL_MESSAGES = {ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
                    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
                    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed."}


class Authorization:
    def __init__(self, config: BrokerConfig | None = None) -> None:
        """The authorizer ``config`` names; with no config, none: everything is allowed."""
        if config is None:
            self.enabled, self.super_users, self.allow_if_no_acl = False, frozenset(), True
            self._acls, self._authorizer = None, None
            return
        name = config.get("authorizer.class.name").strip()
        if name and name not in AUTHORIZER_NAMES:
            raise ConfigError(f"authorizer.class.name={name}: kbroker's ACL authorizer answers to "
                              f"{', '.join(AUTHORIZER_NAMES)}", "authorizer.class.name", name,
                              config.source("authorizer.class.name"))
        self.enabled = bool(name)
        self.super_users = frozenset(user.strip() for user in config.get("super.users").split(";") if user.strip())
        self.allow_if_no_acl = config.get("allow.everyone.if.no.acl.found")
        self._acls = None
        self._authorizer: Authorizer | None = None

    def authorizer(self, acls: dict) -> Authorizer:
        """The index over ``acls`` (the image's AccessControlEntryRecords), rebuilt when they change."""
        if acls is not self._acls:
            bindings = [binding_of(record) for record in acls.values()]
            self._authorizer = Authorizer(bindings, self.super_users, self.allow_if_no_acl)
            self._acls = acls
        return self._authorizer


def binding_of(record) -> AclBinding:
    return AclBinding(ResourceType(record.resource_type), record.resource_name, PatternType(record.pattern_type),
                      record.principal, record.host, AclOperation(record.operation),
                      AclPermissionType(record.permission_type))


def allowed(broker, context, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    """Whether the request's principal, from its host, may do ``operation`` on the resource."""
    authorization = broker.authorization
    if not authorization.enabled:
        return True
    return authorization.authorizer(broker.image.acls).authorize(
        context.principal, context.client_host, operation, resource_type, name)


def allowed_on_cluster(broker, context, operation: AclOperation) -> bool:
    return allowed(broker, context, operation, ResourceType.CLUSTER, CLUSTER)


def allowed_on_any(broker, context, operation: AclOperation, resource_type: ResourceType) -> bool:
    """Whether some resource of the type could allow it (KIP-679's authorizeByResourceType)."""
    authorization = broker.authorization
    if not authorization.enabled:
        return True
    return authorization.authorizer(broker.image.acls).authorize_any(
        context.principal, context.client_host, operation, resource_type)


def authorized_operations(broker, context, resource_type: ResourceType, name: str) -> int:
    """KIP-430: the bit field of what the principal may do on the resource."""
    authorization = broker.authorization
    if not authorization.enabled:
        authorizer = Authorizer((), frozenset(), allow_everyone_if_no_acl_found=True)
    else:
        authorizer = authorization.authorizer(broker.image.acls)
    return authorizer.authorized_operations(context.principal, context.client_host, resource_type, name)


def require_group(broker, context, operation: AclOperation, group_id: str) -> None:
    """Raise CoordinatorError(GROUP_AUTHORIZATION_FAILED) unless the principal may do this to the group."""
    if not allowed(broker, context, operation, ResourceType.GROUP, group_id):
        raise CoordinatorError(ErrorCode.GROUP_AUTHORIZATION_FAILED)


def require_transactional_id(broker, context, operation: AclOperation, transactional_id: str) -> None:
    """Raise CoordinatorError(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) unless the principal may do this."""
    if not allowed(broker, context, operation, ResourceType.TRANSACTIONAL_ID, transactional_id):
        raise CoordinatorError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
