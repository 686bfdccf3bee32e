"""Classic consumer groups: coordinator lookup, membership and committed offsets."""

FIND_COORDINATOR = """
FindCoordinator 10 versions 0-6 flexible 3+

request
  key: string v0-3
  key_type: int8 v1+ = 0
  coordinator_keys: []string v4+

response
  throttle_time_ms: int32 v1+
  error_code: int16 v0-3
  error_message: string? v1-3
  node_id: int32 v0-3
  host: string v0-3
  port: int32 v0-3
  coordinators: []Coordinator v4+
    key: string
    node_id: int32
    host: string
    port: int32
    error_code: int16
    error_message: string?
"""

JOIN_GROUP = """
JoinGroup 11 versions 0-9 flexible 6+

request
  group_id: string
  session_timeout_ms: int32
  rebalance_timeout_ms: int32 v1+ = -1
  member_id: string
  group_instance_id: string? v5+ = null
  protocol_type: string
  protocols: []JoinGroupRequestProtocol
    name: string
    metadata: bytes
  reason: string? v8+ = null

response
  throttle_time_ms: int32 v2+
  error_code: int16
  generation_id: int32 = -1
  protocol_type: string? v7+ = null
  protocol_name: string nullable v7+
  leader: string
  skip_assignment: bool v9+ = false
  member_id: string
  members: []JoinGroupResponseMember
    member_id: string
    group_instance_id: string? v5+ = null
    metadata: bytes
"""

HEARTBEAT = """
Heartbeat 12 versions 0-4 flexible 4+

request
  group_id: string
  generation_id: int32
  member_id: string
  group_instance_id: string? v3+ = null

response
  throttle_time_ms: int32 v1+
  error_code: int16
"""

LEAVE_GROUP = """
LeaveGroup 13 versions 0-5 flexible 4+

request
  group_id: string
  member_id: string v0-2
  members: []MemberIdentity v3+
    member_id: string
    group_instance_id: string? = null
    reason: string? v5+ = null

response
  throttle_time_ms: int32 v1+
  error_code: int16
  members: []MemberResponse v3+
    member_id: string
    group_instance_id: string?
    error_code: int16
"""

SYNC_GROUP = """
SyncGroup 14 versions 0-5 flexible 4+

request
  group_id: string
  generation_id: int32
  member_id: string
  group_instance_id: string? v3+ = null
  protocol_type: string? v5+ = null
  protocol_name: string? v5+ = null
  assignments: []SyncGroupRequestAssignment
    member_id: string
    assignment: bytes

response
  throttle_time_ms: int32 v1+
  error_code: int16
  protocol_type: string? v5+ = null
  protocol_name: string? v5+ = null
  assignment: bytes
"""

DESCRIBE_GROUPS = """
DescribeGroups 15 versions 0-6 flexible 5+

request
  groups: []string
  include_authorized_operations: bool v3+

response
  throttle_time_ms: int32 v1+
  groups: []DescribedGroup
    error_code: int16
    error_message: string? v6+ = null
    group_id: string
    group_state: string
    protocol_type: string
    protocol_data: string
    members: []DescribedGroupMember
      member_id: string
      group_instance_id: string? v4+ = null
      client_id: string
      client_host: string
      member_metadata: bytes
      member_assignment: bytes
    authorized_operations: int32 v3+ = -2147483648
"""

LIST_GROUPS = """
ListGroups 16 versions 0-5 flexible 3+

request
  states_filter: []string v4+
  types_filter: []string v5+

response
  throttle_time_ms: int32 v1+
  error_code: int16
  groups: []ListedGroup
    group_id: string
    protocol_type: string
    group_state: string v4+
    group_type: string v5+
"""

DELETE_GROUPS = """
DeleteGroups 42 versions 0-3 flexible 2+

request
  groups_names: []string

response
  throttle_time_ms: int32
  results: []DeletableGroupResult
    group_id: string
    error_code: int16
    error_message: string? v3+ = null
"""

# CommitTimestamp (v1 only) lies below the declared range and is left out.
OFFSET_COMMIT = """
OffsetCommit 8 versions 2-10 flexible 8+

request
  group_id: string
  generation_id_or_member_epoch: int32 = -1
  member_id: string
  group_instance_id: string? v7+ = null
  retention_time_ms: int64 v2-4 = -1
  topics: []OffsetCommitRequestTopic
    name: string v2-9
    topic_id: uuid v10+
    partitions: []OffsetCommitRequestPartition
      partition_index: int32
      committed_offset: int64
      committed_leader_epoch: int32 v6+ = -1
      committed_metadata: string?

response
  throttle_time_ms: int32 v3+
  topics: []OffsetCommitResponseTopic
    name: string v2-9
    topic_id: uuid v10+
    partitions: []OffsetCommitResponsePartition
      partition_index: int32
      error_code: int16
"""

OFFSET_FETCH = """
OffsetFetch 9 versions 1-10 flexible 6+

request
  group_id: string v1-7
  topics: []OffsetFetchRequestTopic v1-7 nullable v2-7
    name: string
    partition_indexes: []int32
  groups: []OffsetFetchRequestGroup v8+
    group_id: string
    member_id: string? v9+ = null
    member_epoch: int32 v9+ = -1
    topics: []OffsetFetchRequestTopics?
      name: string v8-9
      topic_id: uuid v10+
      partition_indexes: []int32
  require_stable: bool v7+ = false

response
  throttle_time_ms: int32 v3+
  topics: []OffsetFetchResponseTopic v1-7
    name: string
    partitions: []OffsetFetchResponsePartition
      partition_index: int32
      committed_offset: int64
      committed_leader_epoch: int32 v5-7 = -1
      metadata: string?
      error_code: int16
  error_code: int16 v2-7 = 0
  groups: []OffsetFetchResponseGroup v8+
    group_id: string
    topics: []OffsetFetchResponseTopics
      name: string v8-9
      topic_id: uuid v10+
      partitions: []OffsetFetchResponsePartitions
        partition_index: int32
        committed_offset: int64
        committed_leader_epoch: int32 = -1
        metadata: string?
        error_code: int16
    error_code: int16 = 0
"""

OFFSET_DELETE = """
OffsetDelete 47 versions 0 flexible none

request
  group_id: string
  topics: []OffsetDeleteRequestTopic
    name: string
    partitions: []OffsetDeleteRequestPartition
      partition_index: int32

response
  error_code: int16
  throttle_time_ms: int32
  topics: []OffsetDeleteResponseTopic
    name: string
    partitions: []OffsetDeleteResponsePartition
      partition_index: int32
      error_code: int16
"""

DECLARATIONS = [
    FIND_COORDINATOR,
    JOIN_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    SYNC_GROUP,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    DELETE_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    OFFSET_DELETE,
]
