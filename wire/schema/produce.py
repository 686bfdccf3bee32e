"""Produce."""

# Kafka 4.x removed v0-2 (KIP-896); we still advertise them, because librdkafka
# checks for them (KAFKA-18659), and close the connection on a request of one, as
# Kafka 4's broker does (the handler registry reads ``rejected``).
PRODUCE = """
Produce 0 versions 0-13 flexible 9+ rejected 0-2

request
  transactional_id: string? v3+ = null
  acks: int16
  timeout_ms: int32
  topic_data: []TopicProduceData
    name: string v0-12
    topic_id: uuid v13+
    partition_data: []PartitionProduceData
      index: int32
      records: records?

response
  responses: []TopicProduceResponse
    name: string v0-12
    topic_id: uuid v13+
    partition_responses: []PartitionProduceResponse
      index: int32
      error_code: int16
      base_offset: int64
      log_append_time_ms: int64 v2+ = -1
      log_start_offset: int64 v5+ = -1
      record_errors: []BatchIndexAndErrorMessage v8+
        batch_index: int32
        batch_index_error_message: string? = null
      error_message: string? v8+ = null
      current_leader: LeaderIdAndEpoch v10+ tag 0
        leader_id: int32 = -1
        leader_epoch: int32 = -1
  throttle_time_ms: int32 v1+ = 0
  node_endpoints: []NodeEndpoint v10+ tag 0
    node_id: int32
    host: string
    port: int32
    rack: string? = null
"""

DECLARATIONS = [PRODUCE]
