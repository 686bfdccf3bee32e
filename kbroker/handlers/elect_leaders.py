"""ElectLeaders (43): preferred or unclean leader election, decided by the active controller."""

from kbroker import handlers
from kbroker.controller.partitions import PREFERRED, UNCLEAN, elect
from kbroker.security.acls import AclOperation
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

ElectLeadersResponse = API_BY_NAME["ElectLeaders"].response_class
TopicResult = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = TopicResult.PartitionResult
# As Kafka, every partition refused carries a message (its ApiError's); one elected carries none.
MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "The partition already has the leader this election would choose.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred replica is not live or not in the ISR.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "No replica of the partition is live.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "No such topic or partition.",
    ErrorCode.NOT_CONTROLLER: "This node is not the active controller.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ALTER on the cluster is needed.",
}
TOP_LEVEL_ERRORS = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.INVALID_REQUEST)


def _wanted(owner, request) -> list[tuple[str, list[int]]]:
    if request.topic_partitions is None:  # every partition
        return [(name, [p.partition for p in topic.partitions]) for name, topic in sorted(owner.image.topics.items())]
    return [(wanted.topic, list(wanted.partitions)) for wanted in request.topic_partitions]


def _response(results, message: str | None = None) -> object:
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=[
        TopicResult(topic=name, partition_result=[
            PartitionResult(partition_id=p, error_code=code,
                            error_message=None if code == ErrorCode.NONE else message or MESSAGES.get(code, code.name))
            for p, code in partitions]) for name, partitions in results])


def _refusal(request, code: int = ErrorCode.NOT_CONTROLLER, message: str | None = None):
    wanted = [] if request.topic_partitions is None else [(t.topic, list(t.partitions)) for t in request.topic_partitions]
    response = _response([(name, [(p, ErrorCode(code)) for p in partitions]) for name, partitions in wanted], message)
    if code in TOP_LEVEL_ERRORS:
        response.error_code = code  # v1+ has a top-level error; v0 clients read the partitions'
    return response


@handlers.handles("ElectLeaders", 0, 2)
@handlers.metadata_change(_refusal, AclOperation.ALTER)
async def handle(owner, context, request):
    election_type = request.election_type if context.api_version >= 1 else PREFERRED
    if election_type not in (PREFERRED, UNCLEAN):  # Kafka's controller refuses the whole request
        return _refusal(request, ErrorCode.INVALID_REQUEST, f"No election type {election_type}.")
    results, change = [], []
    for name, partitions in _wanted(owner, request):
        answers = []
        for partition in partitions:
            code, record = elect(owner.image, name, partition, election_type)
            answers.append([partition, ErrorCode(code)])
            if record is not None:
                change.append(record)
        results.append((name, answers))
    error = await owner.submit(change) if change else None
    if error is not None:
        for _, answers in results:
            for answer in answers:
                if answer[1] == ErrorCode.NONE:
                    answer[1] = ErrorCode(error)
    if request.topic_partitions is None:  # asked for all: only the partitions an election was held for,
        # but every topic, as Kafka's controller answers (a topic whose partitions needed none, with none)
        results = [(name, [a for a in answers if a[1] != ErrorCode.ELECTION_NOT_NEEDED]) for name, answers in results]
    return _response([(name, [tuple(a) for a in answers]) for name, answers in results])
