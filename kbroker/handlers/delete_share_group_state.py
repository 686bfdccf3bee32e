"""DeleteShareGroupState (86): the group coordinator has the share coordinator delete a share-partition's
state (KIP-932), as a share group or its offsets are deleted."""

from __future__ import annotations

from kbroker import handlers
from kbroker.handlers.share_state import answer_share_state


@handlers.handles("DeleteShareGroupState", 0, 0)
async def handle(broker, context, request):
    return await answer_share_state(broker, context, "DeleteShareGroupState", request)
