"""ReadShareGroupStateSummary (87): the start offset and epochs of a share-partition's state (KIP-932), to
describe a share group's offsets; v1 adds KIP-1226's delivery complete count."""

from __future__ import annotations

from kbroker import handlers
from kbroker.handlers.share_state import answer_share_state


@handlers.handles("ReadShareGroupStateSummary", 0, 1)
async def handle(broker, context, request):
    return await answer_share_state(broker, context, "ReadShareGroupStateSummary", request)
