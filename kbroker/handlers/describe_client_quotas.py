"""DescribeClientQuotas (48): the quotas of the entities a filter matches (KIP-546); needs
DESCRIBE_CONFIGS on the cluster."""

from kbroker import handlers
from kbroker.security import quotas
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import allowed_on_cluster
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeClientQuotasResponse = API_BY_NAME["DescribeClientQuotas"].response_class
Entry = DescribeClientQuotasResponse.EntryData


@handlers.handles("DescribeClientQuotas", 0, 1)
async def handle(broker, context, request):
    if not allowed_on_cluster(broker, context, AclOperation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None,
                                            entries=None)
    components = [(c.entity_type, c.match_type, c.match) for c in request.components]
    problem = quotas.validate_describe(components)
    if problem is not None:
        return DescribeClientQuotasResponse(error_code=problem[0], error_message=problem[1], entries=None)
    found = quotas.describe(broker.image.client_quotas, components, request.strict)
    return DescribeClientQuotasResponse(entries=[
        Entry(entity=[Entry.EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
              values=[Entry.ValueData(key=key, value=value) for key, value in sorted(values.items())])
        for entity, values in found])
