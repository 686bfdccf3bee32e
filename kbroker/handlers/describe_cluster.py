"""DescribeCluster (60): the cluster id, the brokers and a controller id clients can reach."""

from kbroker import handlers
from kbroker.security.acls import ResourceType
from kbroker.security.authorization import CLUSTER, authorized_operations
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeClusterResponse = API_BY_NAME["DescribeCluster"].response_class
BrokerResult = DescribeClusterResponse.DescribeClusterBroker

BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
# With no authorizer Kafka grants every operation a cluster supports: CREATE(5), ALTER(7), DESCRIBE(8),
# CLUSTER_ACTION(9), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11), IDEMPOTENT_WRITE(12), as a bit field.
OPERATIONS_NOT_ASKED = -2147483648


@handlers.handles("DescribeCluster", 0, 2)
async def handle(broker, context, request):
    if request.endpoint_type != BROKER_ENDPOINT:
        return _endpoint_error(request.endpoint_type, context.api_version)
    image = broker.image
    broker_ids = sorted(b.node_id for b in image.live_brokers)
    # Clients cannot talk to a KRaft controller, so, as Kafka does, name a broker when the controller is not one.
    controller_id = image.controller_id if image.controller_id in broker_ids else (broker_ids[0] if broker_ids else -1)
    return DescribeClusterResponse(
        cluster_id=image.cluster_id,
        controller_id=controller_id,
        brokers=[BrokerResult(broker_id=b.node_id, host=host, port=port, rack=b.rack, is_fenced=b.fenced)
                 for b, host, port in image.addresses(context.listener, fenced=request.include_fenced_brokers)],
        cluster_authorized_operations=(authorized_operations(broker, context, ResourceType.CLUSTER, CLUSTER)
                                       if request.include_cluster_authorized_operations else OPERATIONS_NOT_ASKED),
    )


def _endpoint_error(endpoint_type: int, version: int):
    if endpoint_type == CONTROLLER_ENDPOINT:
        code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
        message = "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
    else:
        code, message = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {endpoint_type}"
    return DescribeClusterResponse(
        error_code=ErrorCode.INVALID_REQUEST if version == 0 else code, error_message=message, cluster_id=""
    )
