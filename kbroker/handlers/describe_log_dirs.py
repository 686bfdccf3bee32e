"""DescribeLogDirs (35): the one log dir, each hosted partition's size, and the disk's space."""

import os

from kbroker import handlers
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import allowed_on_cluster
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeLogDirsResponse = API_BY_NAME["DescribeLogDirs"].response_class
DirResult = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = DirResult.DescribeLogDirsTopic
PartitionResult = TopicResult.DescribeLogDirsPartition


@handlers.handles("DescribeLogDirs", 1, 5)
async def handle(broker, context, request):
    if not allowed_on_cluster(broker, context, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
    logs = broker.logs.logs
    # The replicas the image places here, whether or not their logs are open yet (a new partition's opens
    # on its first use, and is empty until then).
    placed = {(name, state.partition) for name, topic in broker.image.topics.items() for state in topic.partitions
              if broker.node_id in state.replicas}
    hosted = placed | set(logs)
    if request.topics is None:
        wanted = hosted
    else:
        wanted = {(topic.topic, index) for topic in request.topics for index in topic.partitions} & hosted
    by_topic: dict[str, list] = {}
    for topic, index in sorted(wanted):
        log = logs.get((topic, index))
        # A leader's log is never behind itself: no lag, and no future (moving) replicas on one dir.
        by_topic.setdefault(topic, []).append(PartitionResult(
            partition_index=index, partition_size=log.size_bytes if log is not None else 0, offset_lag=0,
            is_future_key=False))
    log_dir = os.path.abspath(broker.logs.log_dir)
    if broker.log_dir_offline is not None:  # as Kafka describes an offline log directory
        return DescribeLogDirsResponse(results=[DirResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=log_dir, topics=[])])
    try:
        disk = os.statvfs(log_dir)
    except OSError:
        return DescribeLogDirsResponse(results=[DirResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=log_dir, topics=[])])
    result = DirResult(
        log_dir=log_dir,
        topics=[TopicResult(name=name, partitions=partitions) for name, partitions in by_topic.items()],
        total_bytes=disk.f_blocks * disk.f_frsize,
        usable_bytes=disk.f_bavail * disk.f_frsize,
    )
    return DescribeLogDirsResponse(results=[result])
