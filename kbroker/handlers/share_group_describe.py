"""ShareGroupDescribe (77): KIP-932 share groups' epochs, members and their assignments."""

from __future__ import annotations

from kbroker import handlers
from kbroker.handlers.consumer_group_describe import describe_each
from kbroker.wire.schema import API_BY_NAME

ShareGroupDescribeResponse = API_BY_NAME["ShareGroupDescribe"].response_class


@handlers.handles("ShareGroupDescribe", 1, 1)
async def handle(broker, context, request):
    return ShareGroupDescribeResponse(groups=describe_each(
        broker, context, request, broker.groups.coordinator.described_share_group,
        ShareGroupDescribeResponse.DescribedGroup))
