"""PRODUCER_FENCED to the clients that predate it (KIP-588).

KIP-588 gave a fenced transactional producer an error of its own, PRODUCER_FENCED (90); before it the
coordinator answered INVALID_PRODUCER_EPOCH (47), and a client of that time takes 90 for an unknown
error. Kafka answers the request versions that predate the new code with the old one (KafkaApis, per
API): InitProducerId below v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn below v2.
"""

from __future__ import annotations

from kbroker.handlers.deferred import Deferred
from kbroker.wire.errors import ErrorCode

KNOWN_FROM = {"InitProducerId": 4, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2, "EndTxn": 2}


def for_client(api_name: str, api_version: int, error_code: int) -> int:
    """``error_code`` as a client of ``api_version`` understands it."""
    if error_code == ErrorCode.PRODUCER_FENCED and api_version < KNOWN_FROM[api_name]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error_code


def deferred_for_client(api_name: str, api_version: int, answer: Deferred) -> Deferred:
    """``answer`` (a coordinator's deferred answer with a top-level ``error_code``) as ``for_client`` says;
    a version that knows PRODUCER_FENCED gets it as it is, with nothing added to its way."""
    if api_version >= KNOWN_FROM[api_name]:
        return answer
    ready = answer.ready

    async def ready_for_client() -> None:
        await ready()
        answer.response.error_code = for_client(api_name, api_version, answer.response.error_code)

    answer.ready = ready_for_client
    return answer
