"""DescribeAcls (29): the ACL bindings a filter matches, grouped by resource; needs DESCRIBE on the cluster.

A filter naming a code no resource type, pattern type, operation or permission has matches nothing, as
in Kafka (whose filter takes it for UNKNOWN); UNKNOWN itself (0) closes the connection.
"""

from kbroker import handlers
from kbroker.security.acls import (AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType,
                                   has_unknown, validate_filter)
from kbroker.handlers.create_acls import NOT_AUTHORIZED
from kbroker.security.authorization import allowed_on_cluster, binding_of
from kbroker.wire import DecodeError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeAclsResponse = API_BY_NAME["DescribeAcls"].response_class
Resource = DescribeAclsResponse.DescribeAclsResource


def filter_of(wanted) -> tuple[AclBindingFilter | None, tuple[int, str] | None]:
    """A DescribeAcls request or a DeleteAcls filter as an :class:`AclBindingFilter`, or the error to answer."""
    try:
        acl_filter = AclBindingFilter(ResourceType(wanted.resource_type_filter), wanted.resource_name_filter,
                                      PatternType(wanted.pattern_type_filter), wanted.principal_filter,
                                      wanted.host_filter, AclOperation(wanted.operation),
                                      AclPermissionType(wanted.permission_type))
    except ValueError as error:
        return None, (ErrorCode.INVALID_REQUEST, str(error))
    problem = validate_filter(acl_filter)
    return (None, problem) if problem is not None else (acl_filter, None)


def unknown_in(wanted) -> bool:
    """Whether a DescribeAcls request or a DeleteAcls filter names an UNKNOWN code (the connection closes)."""
    return has_unknown(wanted.resource_type_filter, wanted.pattern_type_filter, wanted.operation,
                       wanted.permission_type)


@handlers.handles("DescribeAcls", 1, 3)
async def handle(broker, context, request):
    if unknown_in(request):
        raise DecodeError("DescribeAcls with an UNKNOWN resource type, pattern type, operation or permission")
    if not allowed_on_cluster(broker, context, AclOperation.DESCRIBE):
        return DescribeAclsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=NOT_AUTHORIZED,
                                    resources=[])
    acl_filter, problem = filter_of(request)
    if problem is not None:  # a code no value has: nothing matches
        return DescribeAclsResponse(resources=[])
    grouped: dict[tuple, list] = {}
    for record in broker.image.acls.values():
        binding = binding_of(record)
        if acl_filter.matches(binding):
            key = (binding.resource_type, binding.resource_name, binding.pattern_type)
            grouped.setdefault(key, []).append(Resource.AclDescription(
                principal=binding.principal, host=binding.host, operation=binding.operation,
                permission_type=binding.permission_type))
    return DescribeAclsResponse(resources=[
        Resource(resource_type=kind, resource_name=name, pattern_type=pattern, acls=acls)
        for (kind, name, pattern), acls in sorted(grouped.items())])
