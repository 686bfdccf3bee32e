"""DescribeQuorum (55) on a broker: the metadata quorum's state, as Kafka's brokers answer it, by
asking the active controller (kafka-metadata-quorum and ``kbroker cluster status`` use it; a single
node's is in its own process). Needs DESCRIBE on the cluster."""

from kbroker import handlers
from kbroker.controller.channel import ControllerUnavailable
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import allowed_on_cluster
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeQuorumResponse = API_BY_NAME["DescribeQuorum"].response_class


def _refused(code: int, message: str):
    return DescribeQuorumResponse(error_code=code, error_message=message, topics=[], nodes=[])


def _not_the_leader(response) -> bool:
    """A voter that does not lead says so on the partition: ask another."""
    return bool(response.topics and response.topics[0].partitions
                and response.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER)


@handlers.handles("DescribeQuorum", 0, 2)
async def handle(broker, context, request):
    if not allowed_on_cluster(broker, context, AclOperation.DESCRIBE):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "DESCRIBE on the cluster is needed")
    try:
        return await broker.lifecycle.channel.call("DescribeQuorum", context.api_version, request,
                                                   not_controller=_not_the_leader)
    except ControllerUnavailable as error:
        return _refused(ErrorCode.REQUEST_TIMED_OUT, str(error))
