"""ReadShareGroupState (84): a share-partition's leader reads its state from the share coordinator (KIP-932)
when it first serves it; a newer leader epoch is recorded, which fences the older leaders' writes."""

from __future__ import annotations

from kbroker import handlers
from kbroker.handlers.share_state import answer_share_state


@handlers.handles("ReadShareGroupState", 0, 0)
async def handle(broker, context, request):
    return await answer_share_state(broker, context, "ReadShareGroupState", request)
