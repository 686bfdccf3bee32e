"""WriteShareGroupState (85): a share-partition's leader has the share coordinator keep a change of its state
(KIP-932): the start offset and the delivery states of the records in flight. v1 adds KIP-1226's delivery
complete count."""

from __future__ import annotations

from kbroker import handlers
from kbroker.handlers.share_state import answer_share_state


@handlers.handles("WriteShareGroupState", 0, 1)
async def handle(broker, context, request):
    return await answer_share_state(broker, context, "WriteShareGroupState", request)
