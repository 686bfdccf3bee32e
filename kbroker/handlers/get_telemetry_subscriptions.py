"""GetTelemetrySubscriptions (71): what Kafka answers when no client-metrics subscription is configured.

An empty requested_metrics tells the client not to push (we have no PushTelemetry); it asks again
after push_interval_ms, so it stays quiet.
"""

import uuid

from kbroker import handlers
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema import API_BY_NAME

Response = API_BY_NAME["GetTelemetrySubscriptions"].response_class

PUSH_INTERVAL_MS = 300_000  # Kafka's ClientMetricsConfigs default interval.ms
TELEMETRY_MAX_BYTES = 1024 * 1024  # telemetry.max.bytes
ACCEPTED_COMPRESSION_TYPES = [4, 3, 1, 2]  # zstd, lz4, gzip, snappy, Kafka's order


@handlers.handles("GetTelemetrySubscriptions", 0, 0)
async def handle(broker, context, request):
    instance_id = request.client_instance_id
    if instance_id is None or instance_id == ZERO_UUID:  # a new client: give it an id
        instance_id = uuid.uuid4()
    return Response(
        client_instance_id=instance_id,
        subscription_id=0,
        accepted_compression_types=ACCEPTED_COMPRESSION_TYPES,
        push_interval_ms=PUSH_INTERVAL_MS,
        telemetry_max_bytes=TELEMETRY_MAX_BYTES,
        delta_temporality=True,
        requested_metrics=[],
    )
