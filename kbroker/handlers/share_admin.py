"""What the share groups' admin APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets) share: the messages Kafka answers their errors with (Errors.message())."""

from __future__ import annotations

from kbroker.effects import CoordinatorError
from kbroker.wire.errors import ErrorCode

MESSAGES = {ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
            ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
            ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
            ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
            ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
            ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available."}


def refusal_message(error: CoordinatorError) -> str:
    """The message of a coordinator's refusal: Kafka's for the error, or the coordinator's own sentence
    ("Group g is not a share group.")."""
    return MESSAGES.get(error.error_code, str(error))
