"""Share groups (KIP-932): membership, share fetch and acknowledgement, the share-group
state a share coordinator keeps, and the admin APIs over share-group offsets.

Versions are Kafka 4.2's. The v0s of ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and
ShareAcknowledge were Kafka 4.0's early access and left with 4.1, so their fields that only v0
had (ShareFetch's partition_max_bytes, a nullable records) are not declared.
"""

SHARE_GROUP_HEARTBEAT = """
ShareGroupHeartbeat 76 versions 1 flexible 0+

request
  group_id: string
  member_id: string
  member_epoch: int32
  rack_id: string? = null
  subscribed_topic_names: []string? = null

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

SHARE_GROUP_DESCRIBE = """
ShareGroupDescribe 77 versions 1 flexible 0+

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
      rack_id: string? = null
      member_epoch: int32
      client_id: string
      client_host: string
      subscribed_topic_names: []string
      assignment: Assignment
    authorized_operations: int32 = -2147483648

struct TopicPartitions
  topic_id: uuid
  topic_name: string
  partitions: []int32

struct Assignment
  topic_partitions: []TopicPartitions
"""

# v2: share_acquire_mode (KIP-1206, 0 batch-optimized, 1 record-limit) and Renew
# acknowledgements (KIP-1222, acknowledge type 4, flagged by is_renew_ack).
SHARE_FETCH = """
ShareFetch 78 versions 1-2 flexible 0+

request
  group_id: string? = null
  member_id: string?
  share_session_epoch: int32
  max_wait_ms: int32
  min_bytes: int32
  max_bytes: int32 = 0x7fffffff
  max_records: int32
  batch_size: int32
  share_acquire_mode: int8 v2+ = 0
  is_renew_ack: bool v2+ = false
  topics: []FetchTopic
    topic_id: uuid
    partitions: []FetchPartition
      partition_index: int32
      acknowledgement_batches: []AcknowledgementBatch
        first_offset: int64
        last_offset: int64
        acknowledge_types: []int8
  forgotten_topics_data: []ForgottenTopic
    topic_id: uuid
    partitions: []int32

response
  throttle_time_ms: int32
  error_code: int16
  error_message: string? = null
  acquisition_lock_timeout_ms: int32
  responses: []ShareFetchableTopicResponse
    topic_id: uuid
    partitions: []PartitionData
      partition_index: int32
      error_code: int16
      error_message: string? = null
      acknowledge_error_code: int16
      acknowledge_error_message: string? = null
      current_leader: LeaderIdAndEpoch
        leader_id: int32
        leader_epoch: int32
      records: records
      acquired_records: []AcquiredRecords
        first_offset: int64
        last_offset: int64
        delivery_count: int16
  node_endpoints: []NodeEndpoint
    node_id: int32
    host: string
    port: int32
    rack: string? = null
"""

SHARE_ACKNOWLEDGE = """
ShareAcknowledge 79 versions 1-2 flexible 0+

request
  group_id: string? = null
  member_id: string?
  share_session_epoch: int32
  is_renew_ack: bool v2+ = false
  topics: []AcknowledgeTopic
    topic_id: uuid
    partitions: []AcknowledgePartition
      partition_index: int32
      acknowledgement_batches: []AcknowledgementBatch
        first_offset: int64
        last_offset: int64
        acknowledge_types: []int8

response
  throttle_time_ms: int32
  error_code: int16
  error_message: string? = null
  acquisition_lock_timeout_ms: int32 v2+
  responses: []ShareAcknowledgeTopicResponse
    topic_id: uuid
    partitions: []PartitionData
      partition_index: int32
      error_code: int16
      error_message: string? = null
      current_leader: LeaderIdAndEpoch
        leader_id: int32
        leader_epoch: int32
  node_endpoints: []NodeEndpoint
    node_id: int32
    host: string
    port: int32
    rack: string? = null
"""

# The share coordinator's APIs, which brokers call on the coordinator of a group's
# __share_group_state partition.
INITIALIZE_SHARE_GROUP_STATE = """
InitializeShareGroupState 83 versions 0 flexible 0+

request
  group_id: string
  topics: []InitializeStateData
    topic_id: uuid
    partitions: []PartitionData
      partition: int32
      state_epoch: int32
      start_offset: int64

response
  results: []InitializeStateResult
    topic_id: uuid
    partitions: []PartitionResult
      partition: int32
      error_code: int16
      error_message: string? = null
"""

READ_SHARE_GROUP_STATE = """
ReadShareGroupState 84 versions 0 flexible 0+

request
  group_id: string
  topics: []ReadStateData
    topic_id: uuid
    partitions: []PartitionData
      partition: int32
      leader_epoch: int32

response
  results: []ReadStateResult
    topic_id: uuid
    partitions: []PartitionResult
      partition: int32
      error_code: int16
      error_message: string? = null
      state_epoch: int32
      start_offset: int64
      state_batches: []StateBatch
        first_offset: int64
        last_offset: int64
        delivery_state: int8
        delivery_count: int16
"""

# v1: delivery_complete_count (KIP-1226); the response is unchanged.
WRITE_SHARE_GROUP_STATE = """
WriteShareGroupState 85 versions 0-1 flexible 0+

request
  group_id: string
  topics: []WriteStateData
    topic_id: uuid
    partitions: []PartitionData
      partition: int32
      state_epoch: int32
      leader_epoch: int32
      start_offset: int64
      delivery_complete_count: int32 v1+ = -1
      state_batches: []StateBatch
        first_offset: int64
        last_offset: int64
        delivery_state: int8
        delivery_count: int16

response
  results: []WriteStateResult
    topic_id: uuid
    partitions: []PartitionResult
      partition: int32
      error_code: int16
      error_message: string? = null
"""

DELETE_SHARE_GROUP_STATE = """
DeleteShareGroupState 86 versions 0 flexible 0+

request
  group_id: string
  topics: []DeleteStateData
    topic_id: uuid
    partitions: []PartitionData
      partition: int32

response
  results: []DeleteStateResult
    topic_id: uuid
    partitions: []PartitionResult
      partition: int32
      error_code: int16
      error_message: string? = null
"""

# v1: delivery_complete_count in the response (KIP-1226); the request is unchanged.
READ_SHARE_GROUP_STATE_SUMMARY = """
ReadShareGroupStateSummary 87 versions 0-1 flexible 0+

request
  group_id: string
  topics: []ReadStateSummaryData
    topic_id: uuid
    partitions: []PartitionData
      partition: int32
      leader_epoch: int32

response
  results: []ReadStateSummaryResult
    topic_id: uuid
    partitions: []PartitionResult
      partition: int32
      error_code: int16
      error_message: string? = null
      state_epoch: int32
      leader_epoch: int32
      start_offset: int64
      delivery_complete_count: int32 v1+ = -1
"""

# v1: lag in the response (KIP-1226); the request is unchanged.
DESCRIBE_SHARE_GROUP_OFFSETS = """
DescribeShareGroupOffsets 90 versions 0-1 flexible 0+

request
  groups: []DescribeShareGroupOffsetsRequestGroup
    group_id: string
    topics: []DescribeShareGroupOffsetsRequestTopic?
      topic_name: string
      partitions: []int32

response
  throttle_time_ms: int32
  groups: []DescribeShareGroupOffsetsResponseGroup
    group_id: string
    topics: []DescribeShareGroupOffsetsResponseTopic
      topic_name: string
      topic_id: uuid
      partitions: []DescribeShareGroupOffsetsResponsePartition
        partition_index: int32
        start_offset: int64
        leader_epoch: int32
        lag: int64 v1+ = -1
        error_code: int16
        error_message: string? = null
    error_code: int16
    error_message: string? = null
"""

ALTER_SHARE_GROUP_OFFSETS = """
AlterShareGroupOffsets 91 versions 0 flexible 0+

request
  group_id: string
  topics: []AlterShareGroupOffsetsRequestTopic
    topic_name: string
    partitions: []AlterShareGroupOffsetsRequestPartition
      partition_index: int32
      start_offset: int64

response
  throttle_time_ms: int32
  error_code: int16
  error_message: string? = null
  responses: []AlterShareGroupOffsetsResponseTopic
    topic_name: string
    topic_id: uuid
    partitions: []AlterShareGroupOffsetsResponsePartition
      partition_index: int32
      error_code: int16
      error_message: string? = null
"""

DELETE_SHARE_GROUP_OFFSETS = """
DeleteShareGroupOffsets 92 versions 0 flexible 0+

request
  group_id: string
  topics: []DeleteShareGroupOffsetsRequestTopic
    topic_name: string

response
  throttle_time_ms: int32
  error_code: int16
  error_message: string? = null
  responses: []DeleteShareGroupOffsetsResponseTopic
    topic_name: string
    topic_id: uuid
    error_code: int16
    error_message: string? = null
"""

DECLARATIONS = [
    SHARE_GROUP_HEARTBEAT,
    SHARE_GROUP_DESCRIBE,
    SHARE_FETCH,
    SHARE_ACKNOWLEDGE,
    INITIALIZE_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE,
    WRITE_SHARE_GROUP_STATE,
    DELETE_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE_SUMMARY,
    DESCRIBE_SHARE_GROUP_OFFSETS,
    ALTER_SHARE_GROUP_OFFSETS,
    DELETE_SHARE_GROUP_OFFSETS,
]
