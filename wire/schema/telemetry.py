"""Client telemetry (KIP-714): subscriptions and metric pushes."""

GET_TELEMETRY_SUBSCRIPTIONS = """
GetTelemetrySubscriptions 71 versions 0 flexible 0+

request
  client_instance_id: uuid

response
  throttle_time_ms: int32
  error_code: int16
  client_instance_id: uuid
  subscription_id: int32
  accepted_compression_types: []int8
  push_interval_ms: int32
  telemetry_max_bytes: int32
  delta_temporality: bool
  requested_metrics: []string
"""

PUSH_TELEMETRY = """
PushTelemetry 72 versions 0 flexible 0+

request
  client_instance_id: uuid
  subscription_id: int32
  terminating: bool
  compression_type: int8
  metrics: bytes

response
  throttle_time_ms: int32
  error_code: int16
"""

DECLARATIONS = [GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY]
