"""KRaft cluster control: ISR changes, broker registration and heartbeats, producer-id blocks."""

ALTER_PARTITION = """
AlterPartition 56 versions 2-3 flexible 0+

request
  broker_id: int32
  broker_epoch: int64 = -1
  topics: []TopicData
    topic_id: uuid
    partitions: []PartitionData
      partition_index: int32
      leader_epoch: int32
      new_isr: []int32 v2
      new_isr_with_epochs: []BrokerState v3+
        broker_id: int32
        broker_epoch: int64 = -1
      leader_recovery_state: int8 = 0
      partition_epoch: int32

response
  throttle_time_ms: int32
  error_code: int16
  topics: []TopicData
    topic_id: uuid
    partitions: []PartitionData
      partition_index: int32
      error_code: int16
      leader_id: int32
      leader_epoch: int32
      isr: []int32
      leader_recovery_state: int8 = 0
      partition_epoch: int32
"""

BROKER_REGISTRATION = """
BrokerRegistration 62 versions 0-4 flexible 0+

request
  broker_id: int32
  cluster_id: string
  incarnation_id: uuid
  listeners: []Listener
    name: string
    host: string
    port: uint16
    security_protocol: int16
  features: []Feature
    name: string
    min_supported_version: int16
    max_supported_version: int16
  rack: string?
  is_migrating_zk_broker: bool v1+ = false
  log_dirs: []uuid v2+
  previous_broker_epoch: int64 v3+ = -1

response
  throttle_time_ms: int32
  error_code: int16
  broker_epoch: int64 = -1
"""

BROKER_HEARTBEAT = """
BrokerHeartbeat 63 versions 0-2 flexible 0+

request
  broker_id: int32
  broker_epoch: int64 = -1
  current_metadata_offset: int64
  want_fence: bool
  want_shut_down: bool
  offline_log_dirs: []uuid v1+ tag 0
  cordoned_log_dirs: []uuid? v2+ tag 1 = null

response
  throttle_time_ms: int32
  error_code: int16
  is_caught_up: bool = false
  is_fenced: bool = true
  should_shut_down: bool
"""

# A broker's next block of producer ids, handed out by the active controller (KIP-730).
ALLOCATE_PRODUCER_IDS = """
AllocateProducerIds 67 versions 0 flexible 0+

request
  broker_id: int32
  broker_epoch: int64 = -1

response
  throttle_time_ms: int32
  error_code: int16
  producer_id_start: int64
  producer_id_len: int32
"""

DECLARATIONS = [ALTER_PARTITION, BROKER_REGISTRATION, BROKER_HEARTBEAT, ALLOCATE_PRODUCER_IDS]
