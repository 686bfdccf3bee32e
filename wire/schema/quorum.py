"""KRaft quorum: elections, leader changes, quorum state and snapshot transfer."""

VOTE = """
Vote 52 versions 0-2 flexible 0+

request
  cluster_id: string? = null
  voter_id: int32 v1+ = -1
  topics: []TopicData
    topic_name: string
    partitions: []PartitionData
      partition_index: int32
      replica_epoch: int32
      replica_id: int32
      replica_directory_id: uuid v1+
      voter_directory_id: uuid v1+
      last_offset_epoch: int32
      last_offset: int64
      pre_vote: bool v2+

response
  error_code: int16
  topics: []TopicData
    topic_name: string
    partitions: []PartitionData
      partition_index: int32
      error_code: int16
      leader_id: int32
      leader_epoch: int32
      vote_granted: bool
  node_endpoints: []NodeEndpoint v1+ tag 0
    node_id: int32
    host: string
    port: uint16
"""

BEGIN_QUORUM_EPOCH = """
BeginQuorumEpoch 53 versions 0-1 flexible 1+

request
  cluster_id: string? = null
  voter_id: int32 v1+ = -1
  topics: []TopicData
    topic_name: string
    partitions: []PartitionData
      partition_index: int32
      voter_directory_id: uuid v1+
      leader_id: int32
      leader_epoch: int32
  leader_endpoints: []LeaderEndpoint v1+
    name: string
    host: string
    port: uint16

response
  error_code: int16
  topics: []TopicData
    topic_name: string
    partitions: []PartitionData
      partition_index: int32
      error_code: int16
      leader_id: int32
      leader_epoch: int32
  node_endpoints: []NodeEndpoint v1+ tag 0
    node_id: int32
    host: string
    port: uint16
"""

END_QUORUM_EPOCH = """
EndQuorumEpoch 54 versions 0-1 flexible 1+

request
  cluster_id: string? = null
  topics: []TopicData
    topic_name: string
    partitions: []PartitionData
      partition_index: int32
      leader_id: int32
      leader_epoch: int32
      preferred_successors: []int32 v0
      preferred_candidates: []ReplicaInfo v1+
        candidate_id: int32
        candidate_directory_id: uuid
  leader_endpoints: []LeaderEndpoint v1+
    name: string
    host: string
    port: uint16

response
  error_code: int16
  topics: []TopicData
    topic_name: string
    partitions: []PartitionData
      partition_index: int32
      error_code: int16
      leader_id: int32
      leader_epoch: int32
  node_endpoints: []NodeEndpoint v1+ tag 0
    node_id: int32
    host: string
    port: uint16
"""

DESCRIBE_QUORUM = """
DescribeQuorum 55 versions 0-2 flexible 0+

request
  topics: []TopicData
    topic_name: string
    partitions: []PartitionData
      partition_index: int32

response
  error_code: int16
  error_message: string? v2+
  topics: []TopicData
    topic_name: string
    partitions: []PartitionData
      partition_index: int32
      error_code: int16
      error_message: string? v2+
      leader_id: int32
      leader_epoch: int32
      high_watermark: int64
      current_voters: []ReplicaState
      observers: []ReplicaState
  nodes: []Node v2+
    node_id: int32
    listeners: []Listener
      name: string
      host: string
      port: uint16

struct ReplicaState
  replica_id: int32
  replica_directory_id: uuid v2+
  log_end_offset: int64
  last_fetch_timestamp: int64 v1+ = -1
  last_caught_up_timestamp: int64 v1+ = -1
"""

FETCH_SNAPSHOT = """
FetchSnapshot 59 versions 0-1 flexible 0+

request
  cluster_id: string? tag 0 = null
  replica_id: int32 = -1
  max_bytes: int32 = 0x7fffffff
  topics: []TopicSnapshot
    name: string
    partitions: []PartitionSnapshot
      partition: int32
      current_leader_epoch: int32
      snapshot_id: SnapshotId
        end_offset: int64
        epoch: int32
      position: int64
      replica_directory_id: uuid v1+ tag 0

response
  throttle_time_ms: int32
  error_code: int16
  topics: []TopicSnapshot
    name: string
    partitions: []PartitionSnapshot
      index: int32
      error_code: int16
      snapshot_id: SnapshotId
        end_offset: int64
        epoch: int32
      current_leader: LeaderIdAndEpoch tag 0
        leader_id: int32
        leader_epoch: int32
      size: int64
      position: int64
      unaligned_records: records
  node_endpoints: []NodeEndpoint v1+ tag 0
    node_id: int32
    host: string
    port: uint16
"""

DECLARATIONS = [VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM, FETCH_SNAPSHOT]
