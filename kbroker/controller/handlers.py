"""What the controller listener answers: ApiVersions, KRaft's quorum RPCs, DescribeQuorum,
and the admin and broker requests the controller serves (CreateTopics, BrokerRegistration,
BrokerHeartbeat). A registry of its own: a controller does not answer Produce or Fetch of
user topics, and a broker's client listener does not take votes."""

from __future__ import annotations

from raft import codec
from raft.codec import NotForThisQuorum

from kbroker.handlers import Handler, handles
from kbroker.handlers.api_versions import api_versions_response
from kbroker.handlers.create_topics import create_topics
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

CONTROLLER_HANDLERS: dict[int, Handler] = {}


def controller_api_versions(error_code: int = ErrorCode.NONE):
    return api_versions_response(error_code, CONTROLLER_HANDLERS)


@handles("ApiVersions", 0, 4, CONTROLLER_HANDLERS)
async def api_versions(controller, context, request):
    return controller_api_versions()


async def _quorum_rpc(api_name: str, controller, request):
    try:
        source, message = codec.decode_request(api_name, request, controller.cluster_id)
    except NotForThisQuorum as error:
        return codec.encode_response(api_name, None, error_code=error.error_code)
    answer = await controller.driver.request(source, message)
    return codec.encode_response(api_name, answer, message)


@handles("Vote", 0, 2, CONTROLLER_HANDLERS)
async def vote(controller, context, request):
    return await _quorum_rpc("Vote", controller, request)


@handles("BeginQuorumEpoch", 0, 1, CONTROLLER_HANDLERS)
async def begin_quorum_epoch(controller, context, request):
    return await _quorum_rpc("BeginQuorumEpoch", controller, request)


@handles("EndQuorumEpoch", 0, 1, CONTROLLER_HANDLERS)
async def end_quorum_epoch(controller, context, request):
    return await _quorum_rpc("EndQuorumEpoch", controller, request)


@handles("Fetch", 13, 17, CONTROLLER_HANDLERS)
async def fetch(controller, context, request):
    return await _quorum_rpc("Fetch", controller, request)


@handles("FetchSnapshot", 0, 1, CONTROLLER_HANDLERS)
async def fetch_snapshot(controller, context, request):
    return await _quorum_rpc("FetchSnapshot", controller, request)


DescribeQuorumResponse = API_BY_NAME["DescribeQuorum"].response_class
CreateTopicsResponse = API_BY_NAME["CreateTopics"].response_class


@handles("DescribeQuorum", 0, 2, CONTROLLER_HANDLERS)
async def describe_quorum(controller, context, request):
    """The quorum's state from its leader; elsewhere NOT_LEADER_OR_FOLLOWER with a hint to the leader
    (only the leader knows how far each voter has fetched)."""
    quorum = controller.driver.describe()
    partition_class = DescribeQuorumResponse.TopicData.PartitionData
    leading = quorum["leader"] == controller.node_id
    voters = [partition_class.ReplicaState(replica_id=voter, log_end_offset=end, last_fetch_timestamp=fetched,
                                           last_caught_up_timestamp=-1)
              for voter, end, fetched in quorum["voters"]] if leading else []
    partition = partition_class(
        partition_index=0, error_code=ErrorCode.NONE if leading else ErrorCode.NOT_LEADER_OR_FOLLOWER,
        leader_id=-1 if quorum["leader"] is None else quorum["leader"], leader_epoch=quorum["epoch"],
        high_watermark=quorum["high_watermark"], current_voters=voters, observers=[])
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, topics=[
        DescribeQuorumResponse.TopicData(topic_name=codec.METADATA_TOPIC, partitions=[partition])], nodes=[])


@handles("CreateTopics", 2, 7, CONTROLLER_HANDLERS)
async def create_topics_at_controller(controller, context, request):
    if not controller.is_active:  # its image may lag: answer before planning anything against it
        return CreateTopicsResponse(topics=[CreateTopicsResponse.CreatableTopicResult(
            name=topic.name, error_code=ErrorCode.NOT_CONTROLLER, error_message="This controller is not active.")
            for topic in request.topics])
    return await create_topics(controller, context, request)


BrokerRegistrationResponse = API_BY_NAME["BrokerRegistration"].response_class
BrokerHeartbeatResponse = API_BY_NAME["BrokerHeartbeat"].response_class


@handles("BrokerRegistration", 0, 4, CONTROLLER_HANDLERS)
async def broker_registration(controller, context, request):
    error_code, broker_epoch = await controller.register_broker(request)
    return BrokerRegistrationResponse(throttle_time_ms=0, error_code=error_code, broker_epoch=broker_epoch)


@handles("BrokerHeartbeat", 0, 1, CONTROLLER_HANDLERS)
async def broker_heartbeat(controller, context, request):
    return BrokerHeartbeatResponse(throttle_time_ms=0, **await controller.broker_heartbeat(request))
