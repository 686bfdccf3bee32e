"""The KIP-848 consumer group protocol."""

CONSUMER_GROUP_HEARTBEAT = """
ConsumerGroupHeartbeat 68 versions 0-1 flexible 0+

request
  group_id: string
  member_id: string
  member_epoch: int32
  instance_id: string? = null
  rack_id: string? = null
  rebalance_timeout_ms: int32 = -1
  subscribed_topic_names: []string? = null
  subscribed_topic_regex: string? v1+ = null
  server_assignor: string? = null
  topic_partitions: []TopicPartitions? = null
    topic_id: uuid
    partitions: []int32

response
  throttle_time_ms: int32
  error_code: int16
  error_message: string? = null
  member_id: string? = null
  member_epoch: int32
  heartbeat_interval_ms: int32
  assignment: Assignment? = null
    topic_partitions: []TopicPartitions

struct TopicPartitions
  topic_id: uuid
  partitions: []int32
"""

CONSUMER_GROUP_DESCRIBE = """
ConsumerGroupDescribe 69 versions 0-1 flexible 0+

request
  group_ids: []string
  include_authorized_operations: bool

response
  throttle_time_ms: int32
  groups: []DescribedGroup
    error_code: int16
    error_message: string? = null
    group_id: string
    group_state: string
    group_epoch: int32
    assignment_epoch: int32
    assignor_name: string
    members: []Member
      member_id: string
      instance_id: string? = null
      rack_id: string? = null
      member_epoch: int32
      client_id: string
      client_host: string
      subscribed_topic_names: []string
      subscribed_topic_regex: string? = null
      assignment: Assignment
      target_assignment: Assignment
      member_type: int8 v1+ = -1
    authorized_operations: int32 = -2147483648

struct TopicPartitions
  topic_id: uuid
  topic_name: string
  partitions: []int32

struct Assignment
  topic_partitions: []TopicPartitions
"""

DECLARATIONS = [CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE]
