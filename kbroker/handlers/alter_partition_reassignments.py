"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): moving partitions' replicas.

A reassignment adds the new replicas first; they fetch from the leader and join the ISR, and only
then are the old ones dropped (kbroker/controller/partitions.py), so a partition is never held by
fewer in-sync copies than before while it moves.
"""

from kbroker import handlers
from kbroker.controller.partitions import completed_reassignments, reassign
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import allowed_on_cluster
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

AlterResponse = API_BY_NAME["AlterPartitionReassignments"].response_class
TopicResult = AlterResponse.ReassignableTopicResponse
PartitionResult = TopicResult.ReassignablePartitionResponse
ListResponse = API_BY_NAME["ListPartitionReassignments"].response_class


# As Kafka, a partition refused carries a message (its ApiError's), but where Kafka's is its error's generic
# one, which ApiError leaves out (NO_REASSIGNMENT_IN_PROGRESS); one accepted carries none.
MESSAGES = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "No such topic or partition.",
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: "The replicas must be one or more distinct registered brokers.",
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: None,
    ErrorCode.INVALID_REPLICATION_FACTOR: "The reassignment changes the replication factor, which the request "
                                          "does not allow.",
    ErrorCode.NOT_CONTROLLER: "This node is not the active controller.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ALTER on the cluster is needed.",
}


def _message(code: int) -> str | None:
    if code == ErrorCode.NONE:
        return None
    return MESSAGES[code] if code in MESSAGES else ErrorCode(code).name


def _answer(results, allow_replication_factor_change: bool = True) -> object:
    return AlterResponse(
        throttle_time_ms=0, allow_replication_factor_change=allow_replication_factor_change, error_code=ErrorCode.NONE,
        error_message=None, responses=[TopicResult(name=name, partitions=[
            PartitionResult(partition_index=p, error_code=code, error_message=_message(code)) for p, code in partitions])
            for name, partitions in results])


def _refusal(request, code: int = ErrorCode.NOT_CONTROLLER):
    response = _answer([(t.name, [(p.partition_index, code) for p in t.partitions]) for t in request.topics],
                       request.allow_replication_factor_change)
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        response.error_code = code
    return response


@handlers.handles("AlterPartitionReassignments", 0, 1)
@handlers.metadata_change(_refusal, AclOperation.ALTER)
async def alter(owner, context, request):
    results, change = [], []
    keep_factor = context.api_version >= 1 and not request.allow_replication_factor_change
    image = owner.image
    for topic in request.topics:
        answers = []
        for wanted in topic.partitions:
            target = None if wanted.replicas is None else list(wanted.replicas)
            code, record = reassign(image, topic.name, wanted.partition_index, target)
            # checked once the target is known to be a valid assignment, as Kafka's controller does (KIP-860)
            if (keep_factor and code == ErrorCode.NONE and target is not None
                    and len(target) != len(image.topics[topic.name].partitions[wanted.partition_index].replicas)):
                code, record = ErrorCode.INVALID_REPLICATION_FACTOR, None
            answers.append([wanted.partition_index, code])
            if record is not None:
                change.append(record)
        results.append((topic.name, answers))
    error = await owner.submit(change) if change else None
    if error is None and change:
        done = completed_reassignments(owner.image)  # replicas only removed: nothing to wait for
        if done:
            error = await owner.submit(done)
    for _, answers in results:
        for answer in answers:
            if error is not None and answer[1] == ErrorCode.NONE:
                answer[1] = error
    response = _answer([(name, [tuple(a) for a in answers]) for name, answers in results],
                       request.allow_replication_factor_change)
    if not request.topics:  # Kafka's controller answers an empty request with its message's default, ""
        response.error_message = ""
    return response


@handlers.handles("ListPartitionReassignments", 0, 0)
async def list_reassignments(owner, context, request):
    if not allowed_on_cluster(owner, context, AclOperation.DESCRIBE):
        return ListResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, topics=[])
    wanted = None if request.topics is None else {t.name: set(t.partition_indexes) for t in request.topics}
    topics = []
    for name, topic in sorted(owner.image.topics.items()):
        if wanted is not None and name not in wanted:
            continue
        ongoing = [ListResponse.OngoingTopicReassignment.OngoingPartitionReassignment(
            partition_index=state.partition, replicas=list(state.replicas), adding_replicas=list(state.adding),
            removing_replicas=list(state.removing))
            for state in topic.partitions
            if (state.adding or state.removing) and (wanted is None or state.partition in wanted[name])]
        if ongoing:
            topics.append(ListResponse.OngoingTopicReassignment(name=name, partitions=ongoing))
    return ListResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, topics=topics)
