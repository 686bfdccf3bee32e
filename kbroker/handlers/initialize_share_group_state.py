"""InitializeShareGroupState (83): the group coordinator has the share coordinator start a share-partition's
state (KIP-932) at a state epoch, before the partition is assigned to the share group's members."""

from __future__ import annotations

from kbroker import handlers
from kbroker.handlers.share_state import answer_share_state


@handlers.handles("InitializeShareGroupState", 0, 0)
async def handle(broker, context, request):
    return await answer_share_state(broker, context, "InitializeShareGroupState", request)
