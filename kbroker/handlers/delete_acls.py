"""DeleteAcls (31): remove the ACL bindings each filter matches; needs ALTER on the cluster."""

from kbroker import handlers
from kbroker.metadata import records
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import allowed_on_cluster, binding_of
from kbroker.handlers.create_acls import NOT_AUTHORIZED
from kbroker.handlers.describe_acls import filter_of, unknown_in
from kbroker.wire import DecodeError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DeleteAclsResponse = API_BY_NAME["DeleteAcls"].response_class
FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = FilterResult.DeleteAclsMatchingAcl


def _answer_all(request, code: int, message: str | None = None):
    return DeleteAclsResponse(filter_results=[FilterResult(error_code=code, error_message=message, matching_acls=[])
                                              for _ in request.filters])


@handlers.handles("DeleteAcls", 1, 3)
async def handle(broker, context, request):
    if any(unknown_in(wanted) for wanted in request.filters):
        raise DecodeError("DeleteAcls with an UNKNOWN resource type, pattern type, operation or permission")
    if not allowed_on_cluster(broker, context, AclOperation.ALTER):
        return _answer_all(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED)
    return await _delete(broker, context, request)


@handlers.metadata_change(lambda request, code=ErrorCode.NOT_CONTROLLER: _answer_all(request, code))
async def _delete(broker, context, request):
    removed: set = set()
    results, change = [], []
    for wanted in request.filters:
        acl_filter, problem = filter_of(wanted)
        if problem is not None:
            results.append(FilterResult(error_code=problem[0], error_message=problem[1], matching_acls=[]))
            continue
        matching = []
        for acl_id, record in broker.image.acls.items():
            binding = binding_of(record)
            if not acl_filter.matches(binding):
                continue
            matching.append(Matching(resource_type=binding.resource_type, resource_name=binding.resource_name,
                                     pattern_type=binding.pattern_type, principal=binding.principal,
                                     host=binding.host, operation=binding.operation,
                                     permission_type=binding.permission_type, error_message=None))
            if acl_id not in removed:
                removed.add(acl_id)
                change.append(records.RemoveAccessControlEntryRecord(id=acl_id))
        results.append(FilterResult(error_message=None, matching_acls=matching))
    error = await broker.submit(change) if change else None
    if error is not None:
        results = [FilterResult(error_code=error, matching_acls=[]) for _ in request.filters]
    return DeleteAclsResponse(filter_results=results)
