"""What the controller listener answers: ApiVersions, KRaft's quorum RPCs, DescribeQuorum, and
what brokers ask of the controller (their forwarded metadata changes, BrokerRegistration,
BrokerHeartbeat, AlterPartition, AllocateProducerIds). A registry of its own: a controller does not answer
Produce or Fetch of user topics, and a broker's client listener does not take votes."""

from __future__ import annotations

from kbroker.raft import codec
from kbroker.raft.codec import NotForThisQuorum

from kbroker.controller.partitions import IsrRequest
from kbroker.handlers import HANDLERS, Handler, alter_configs, handles, incremental_alter_configs
from kbroker.handlers.api_versions import api_versions_response
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

CONTROLLER_HANDLERS: dict[int, Handler] = {}


def controller_api_versions(error_code: int = ErrorCode.NONE):
    return api_versions_response(error_code, CONTROLLER_HANDLERS)


@handles("ApiVersions", 0, 4, CONTROLLER_HANDLERS)
async def api_versions(controller, context, request):
    return controller_api_versions()


def _quorum_rpc(api_name: str):
    """The handler of one of KRaft's quorum RPCs: decode it for the core, answer with the core's answer."""
    async def handle(controller, context, request):
        try:
            source, message = codec.decode_request(api_name, request, controller.cluster_id)
        except NotForThisQuorum as error:
            return codec.encode_response(api_name, None, error_code=error.error_code)
        answer = await controller.driver.request(source, message)
        return codec.encode_response(api_name, answer, message)

    return handle


for _name, _low, _high in (("Vote", 0, 2), ("BeginQuorumEpoch", 0, 1), ("EndQuorumEpoch", 0, 1), ("Fetch", 13, 17),
                           ("FetchSnapshot", 0, 1)):
    handles(_name, _low, _high, CONTROLLER_HANDLERS)(_quorum_rpc(_name))


DescribeQuorumResponse = API_BY_NAME["DescribeQuorum"].response_class
UNKNOWN_PARTITION_MESSAGE = "The metadata quorum is partition 0 of __cluster_metadata, alone in the request."


def _names_the_quorum(request) -> bool:
    """Whether the request asks for the quorum's one partition and nothing else."""
    return (len(request.topics) == 1 and request.topics[0].topic_name == codec.METADATA_TOPIC
            and len(request.topics[0].partitions) == 1 and request.topics[0].partitions[0].partition_index == 0)


@handles("DescribeQuorum", 0, 2, CONTROLLER_HANDLERS)
async def describe_quorum(controller, context, request):
    """The quorum's state from its leader; elsewhere NOT_LEADER_OR_FOLLOWER with a hint to the leader
    (only the leader knows how far each voter has fetched)."""
    partition_class = DescribeQuorumResponse.TopicData.PartitionData
    if not _names_the_quorum(request):  # as Kafka's KafkaRaftClient: each partition asked for, unknown
        return DescribeQuorumResponse(error_code=ErrorCode.NONE, topics=[DescribeQuorumResponse.TopicData(
            topic_name=topic.topic_name, partitions=[partition_class(
                partition_index=wanted.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                error_message=UNKNOWN_PARTITION_MESSAGE, leader_id=0, leader_epoch=0, high_watermark=0,
                current_voters=[], observers=[]) for wanted in topic.partitions]) for topic in request.topics], nodes=[])
    quorum = controller.driver.describe()
    leading = quorum["leader"] == controller.node_id
    def replicas(kind: str) -> list:
        # The leader has caught up with itself now (Kafka's LeaderState); another voter's catch-up is not
        # tracked here: -1.
        return [partition_class.ReplicaState(replica_id=replica, log_end_offset=end, last_fetch_timestamp=fetched,
                                             last_caught_up_timestamp=fetched if replica == controller.node_id else -1)
                for replica, end, fetched in quorum[kind]] if leading else []
    partition = partition_class(
        partition_index=0, error_code=ErrorCode.NONE if leading else ErrorCode.NOT_LEADER_OR_FOLLOWER,
        leader_id=-1 if quorum["leader"] is None else quorum["leader"], leader_epoch=quorum["epoch"],
        high_watermark=quorum["high_watermark"], current_voters=replicas("voters"), observers=replicas("observers"))
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, topics=[
        DescribeQuorumResponse.TopicData(topic_name=codec.METADATA_TOPIC, partitions=[partition])],
        nodes=_voter_endpoints(controller) if leading else [])


def _voter_endpoints(controller) -> list:
    """v2's nodes: each voter's controller listener, from controller.quorum.voters (a sole voter in the
    broker's process listens nowhere: none)."""
    if not controller.listens:
        return []
    node, listener = DescribeQuorumResponse.Node, DescribeQuorumResponse.Node.Listener
    return [node(node_id=voter, listeners=[listener(name=controller.listener_name, host=host, port=port)])
            for voter, (host, port) in sorted(controller.driver.voters.items())]


# The metadata changes a broker forwards: the same handlers as a lone broker's, planned here against the
# quorum's image (kbroker.handlers.metadata_change refuses them while this controller is not active).
for _api_name in ("CreateTopics", "DeleteTopics", "CreatePartitions", "ElectLeaders", "AlterPartitionReassignments",
                  "AlterUserScramCredentials", "CreateAcls", "DeleteAcls", "AlterClientQuotas"):
    CONTROLLER_HANDLERS[API_BY_NAME[_api_name].key] = HANDLERS[API_BY_NAME[_api_name].key]
# Config changes too, without the broker's own check of broker resources: the forwarding broker made it.
handles("AlterConfigs", 0, 2, CONTROLLER_HANDLERS)(alter_configs.handle_forwarded)
handles("IncrementalAlterConfigs", 0, 1, CONTROLLER_HANDLERS)(incremental_alter_configs.handle_forwarded)


# A SASL controller listener authenticates brokers and controllers as a broker's listeners do clients.
for _api_name in ("SaslHandshake", "SaslAuthenticate"):
    CONTROLLER_HANDLERS[API_BY_NAME[_api_name].key] = HANDLERS[API_BY_NAME[_api_name].key]


BrokerRegistrationResponse = API_BY_NAME["BrokerRegistration"].response_class
BrokerHeartbeatResponse = API_BY_NAME["BrokerHeartbeat"].response_class


@handles("BrokerRegistration", 0, 4, CONTROLLER_HANDLERS)
async def broker_registration(controller, context, request):
    error_code, broker_epoch = await controller.register_broker(request)
    return BrokerRegistrationResponse(throttle_time_ms=0, error_code=error_code, broker_epoch=broker_epoch)


@handles("BrokerHeartbeat", 0, 1, CONTROLLER_HANDLERS)
async def broker_heartbeat(controller, context, request):
    return BrokerHeartbeatResponse(throttle_time_ms=0, **await controller.broker_heartbeat(request))


AllocateProducerIdsResponse = API_BY_NAME["AllocateProducerIds"].response_class


@handles("AllocateProducerIds", 0, 0, CONTROLLER_HANDLERS)
async def allocate_producer_ids(controller, context, request):
    error_code, start, length = await controller.allocate_producer_ids(request)
    return AllocateProducerIdsResponse(throttle_time_ms=0, error_code=error_code, producer_id_start=start,
                                       producer_id_len=length)


AlterPartitionResponse = API_BY_NAME["AlterPartition"].response_class


@handles("AlterPartition", 2, 3, CONTROLLER_HANDLERS)
async def alter_partition(controller, context, request):
    wanted = []
    for topic in request.topics:
        for partition in topic.partitions:
            if context.api_version >= 3:
                isr = tuple(member.broker_id for member in partition.new_isr_with_epochs)
                epochs = {member.broker_id: member.broker_epoch for member in partition.new_isr_with_epochs}
            else:
                isr, epochs = tuple(partition.new_isr), None
            wanted.append(IsrRequest(topic.topic_id, partition.partition_index, partition.leader_epoch,
                                     partition.partition_epoch, isr, epochs))
    error_code, answers = await controller.alter_partitions(request.broker_id, request.broker_epoch, wanted)
    if error_code != ErrorCode.NONE:
        return AlterPartitionResponse(throttle_time_ms=0, error_code=error_code, topics=[])
    topics: dict = {}
    partition_class = AlterPartitionResponse.TopicData.PartitionData
    for asked, (code, state) in zip(wanted, answers):
        answer = partition_class(partition_index=asked.partition, error_code=code, leader_id=-1, leader_epoch=-1,
                                 isr=[], partition_epoch=-1)
        if state is not None:
            answer.leader_id, answer.leader_epoch = state.leader, state.leader_epoch
            answer.isr, answer.partition_epoch = list(state.isr), state.partition_epoch
        topics.setdefault(asked.topic_id, []).append(answer)
    return AlterPartitionResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=[
        AlterPartitionResponse.TopicData(topic_id=topic_id, partitions=answers) for topic_id, answers in topics.items()])
