"""Metadata (3): brokers, controller and topic partitions from the current image."""

from kbroker import handlers
from kbroker.handlers.interfaces import HandlerNode
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import CLUSTER, allowed, allowed_on_cluster, authorized_operations
from kbroker.topics import TopicError, TopicRequest, validate_topic_name
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema import API_BY_NAME

METADATA = API_BY_NAME["Metadata"]
MetadataResponse = METADATA.response_class
Topic = MetadataResponse.MetadataResponseTopic
Partition = Topic.MetadataResponsePartition
Broker = MetadataResponse.MetadataResponseBroker


def _topic(topic, live: frozenset[int]) -> object:
    """``live``: the brokers registered and unfenced whose log directory is online, as far as this broker
    knows; the others' replicas are offline (v5+), as Kafka's metadata cache reports them (a broker whose
    log directory failed asks to be fenced: kbroker/lifecycle.py)."""
    partitions = [
        Partition(
            partition_index=p.partition,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            offline_replicas=[replica for replica in p.replicas if replica not in live],
        )
        for p in topic.partitions
    ]
    return Topic(name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal, partitions=partitions)


def _answered(broker: HandlerNode, context, request, image, topic, live: frozenset[int]):
    """A topic's part of the answer: encoded once per version and kept while the topic is unchanged
    (kbroker/metadata/answers.py), unless it carries the principal's authorized operations."""
    if getattr(request, "include_topic_authorized_operations", False):
        return _topic(topic, live)
    version = context.api_version
    return broker.metadata_answers.get(image.topics, topic, version, live,
                                       lambda: METADATA.encode_response_part(version, _topic(topic, live)))


def _by_id(wanted) -> bool:
    """A topic asked for by id (v10+): the id wins over the name, which the Java client sends empty."""
    return wanted.topic_id is not None and wanted.topic_id != ZERO_UUID


async def _auto_create(broker: HandlerNode, context, request) -> None:
    """Create asked-for topics that do not exist, when the client, auto.create.topics.enable and the
    ACLs (CREATE on the cluster or the topic) allow it."""
    if not (request.allow_auto_topic_creation and broker.config.auto_create_topics_enable):
        return
    may_create_any = allowed_on_cluster(broker, context, AclOperation.CREATE)
    wanted = [TopicRequest(topic.name, -1, -1, {}, {}) for topic in request.topics
              if not _by_id(topic) and topic.name is not None and topic.name not in broker.image.topics
              and not topic.name.startswith("__") and _valid_name(topic.name) and _may_see(broker, context, topic.name)
              and (may_create_any or allowed(broker, context, AclOperation.CREATE, ResourceType.TOPIC, topic.name))]
    if wanted:
        await broker.auto_create(wanted)


def _valid_name(name: str) -> bool:
    """An invalid name is answered INVALID_TOPIC_EXCEPTION here, not sent on to the controller."""
    try:
        validate_topic_name(name)
    except TopicError:
        return False
    return True


def _may_see(broker: HandlerNode, context, name: str) -> bool:
    return allowed(broker, context, AclOperation.DESCRIBE, ResourceType.TOPIC, name)


@handlers.handles("Metadata", 0, 13)
async def handle(broker: HandlerNode, context, request):
    """As Kafka's: topics the principal may not describe are left out of an all-topics answer and
    answered TOPIC_AUTHORIZATION_FAILED when asked for by name or id."""
    image = broker.image
    live = frozenset(b.node_id for b in image.live_brokers  # its own replicas are offline once its log
                     if broker.log_dir_offline is None or b.node_id != broker.node_id)  # directory is, fenced or not
    if request.topics is None or (context.api_version == 0 and not request.topics):
        # Null asks for every topic (v1+); so does an empty list in v0.
        topics = [_answered(broker, context, request, image, topic, live) for topic in image.topics.values()
                  if _may_see(broker, context, topic.name)]
    else:
        await _auto_create(broker, context, request)
        image = broker.image
        topics = []
        for wanted in request.topics:
            by_id = _by_id(wanted)
            topic = image.topic_by_id(wanted.topic_id) if by_id else image.topics.get(wanted.name)
            name = topic.name if topic is not None else wanted.name
            if (topic is not None or not by_id) and not _may_see(broker, context, name):
                topics.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=wanted.name,
                                    topic_id=wanted.topic_id or ZERO_UUID, partitions=[]))
            elif topic is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if not by_id and not _valid_name(wanted.name):
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                topics.append(Topic(error_code=code, name=wanted.name, topic_id=wanted.topic_id or ZERO_UUID))
            else:
                topics.append(_answered(broker, context, request, image, topic, live))
    if getattr(request, "include_topic_authorized_operations", False):
        for topic in topics:
            if topic.error_code == ErrorCode.NONE:
                topic.topic_authorized_operations = authorized_operations(broker, context, ResourceType.TOPIC,
                                                                          topic.name)
    response = MetadataResponse(
        brokers=[Broker(node_id=b.node_id, host=host, port=port, rack=b.rack)
                 for b, host, port in image.live_addresses(context.listener)],
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        topics=topics,
    )
    if getattr(request, "include_cluster_authorized_operations", False):
        response.cluster_authorized_operations = authorized_operations(broker, context, ResourceType.CLUSTER,
                                                                       CLUSTER)
    return response
