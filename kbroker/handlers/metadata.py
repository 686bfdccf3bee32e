"""Metadata (3): brokers, controller and topic partitions from the current image."""

from kbroker import handlers
from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID
from wire.schema import API_BY_NAME

MetadataResponse = API_BY_NAME["Metadata"].response_class
Topic = MetadataResponse.MetadataResponseTopic
Partition = Topic.MetadataResponsePartition
Broker = MetadataResponse.MetadataResponseBroker


def _topic(topic) -> object:
    partitions = [
        Partition(
            partition_index=p.partition,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
        )
        for p in topic.partitions
    ]
    return Topic(name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal, partitions=partitions)


@handlers.handles("Metadata", 0, 12)
async def handle(broker, context, request):
    image = broker.image
    if request.topics is None or (context.api_version == 0 and not request.topics):
        # Null asks for every topic (v1+); so does an empty list in v0.
        topics = [_topic(topic) for topic in image.topics.values()]
    else:
        topics = []
        for wanted in request.topics:
            topic = image.topics.get(wanted.name) if wanted.name is not None else image.topic_by_id(wanted.topic_id)
            if topic is None:
                topics.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=wanted.name, topic_id=wanted.topic_id or ZERO_UUID))
            else:
                topics.append(_topic(topic))
    return MetadataResponse(
        brokers=[Broker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack) for b in image.brokers],
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        topics=topics,
    )
