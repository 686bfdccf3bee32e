"""WriteTxnMarkers (27): a transaction coordinator ends a producer's transaction on partitions this broker leads."""

from __future__ import annotations

from kbroker import handlers
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import allowed_on_cluster
from kbroker.txn.markers import write_markers
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

WriteTxnMarkersResponse = API_BY_NAME["WriteTxnMarkers"].response_class
MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


@handlers.handles("WriteTxnMarkers", 1, 2)
async def handle(broker, context, request):
    if not allowed_on_cluster(broker, context, AclOperation.CLUSTER_ACTION):  # brokers only
        return WriteTxnMarkersResponse(markers=[
            MarkerResult(producer_id=marker.producer_id, topics=[
                TopicResult(name=topic.name, partitions=[
                    PartitionResult(partition_index=index, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    for index in topic.partition_indexes]) for topic in marker.topics])
            for marker in request.markers])
    results = []
    for marker in request.markers:
        partitions = [(topic.name, index) for topic in marker.topics for index in topic.partition_indexes]
        errors = await write_markers(broker, marker.producer_id, marker.producer_epoch, marker.transaction_result,
                                     marker.coordinator_epoch, partitions)
        topics = [TopicResult(name=topic.name, partitions=[
            PartitionResult(partition_index=index, error_code=errors[(topic.name, index)]) for index in topic.partition_indexes])
            for topic in marker.topics]
        results.append(MarkerResult(producer_id=marker.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=results)
