"""CreateAcls (30): add ACL bindings (KIP-290 literal and prefixed patterns) as metadata records.

Needs ALTER on the cluster. Each creation is checked as Kafka checks it; an
ACL already present is not added twice.
"""

import uuid

from kbroker import handlers
from kbroker.metadata import records
from kbroker.security.acls import (AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType, has_unknown,
                                   validate_binding)
from kbroker.security.authorization import REFUSAL_MESSAGES, allowed_on_cluster, binding_of
from kbroker.wire import DecodeError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

CreateAclsResponse = API_BY_NAME["CreateAcls"].response_class
Result = CreateAclsResponse.AclCreationResult
NOT_AUTHORIZED = REFUSAL_MESSAGES[ErrorCode.CLUSTER_AUTHORIZATION_FAILED]


def _answer_all(request, code: int, message: str | None = None):
    return CreateAclsResponse(results=[Result(error_code=code, error_message=message) for _ in request.creations])


@handlers.handles("CreateAcls", 1, 3)
async def handle(broker, context, request):
    if any(has_unknown(c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)
           for c in request.creations):
        raise DecodeError("CreateAcls with an UNKNOWN resource type, pattern type, operation or permission")
    if not allowed_on_cluster(broker, context, AclOperation.ALTER):
        return _answer_all(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED)
    return await _create(broker, context, request)


@handlers.metadata_change(lambda request, code=ErrorCode.NOT_CONTROLLER: _answer_all(request, code))
async def _create(broker, context, request):
    existing = {binding_of(record) for record in broker.image.acls.values()}
    results, change = [], []
    for creation in request.creations:
        try:
            binding = AclBinding(ResourceType(creation.resource_type), creation.resource_name,
                                 PatternType(creation.resource_pattern_type), creation.principal, creation.host,
                                 AclOperation(creation.operation), AclPermissionType(creation.permission_type))
        except ValueError as error:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST, error_message=str(error)))
            continue
        problem = validate_binding(binding)
        if problem is not None:
            results.append(Result(error_code=problem[0], error_message=problem[1]))
            continue
        if binding not in existing:
            existing.add(binding)
            change.append(records.AccessControlEntryRecord(
                id=uuid.uuid4(), resource_type=binding.resource_type, resource_name=binding.resource_name,
                pattern_type=binding.pattern_type, principal=binding.principal, host=binding.host,
                operation=binding.operation, permission_type=binding.permission_type))
        results.append(Result())
    error = await broker.submit(change) if change else None
    handlers.mark_not_made(results, error)
    return CreateAclsResponse(results=results)
