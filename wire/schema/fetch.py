"""Fetch."""

FETCH = """
Fetch 1 versions 4-18 flexible 12+

request
  cluster_id: string? v12+ tag 0 = null
  replica_id: int32 v0-14 = -1
  replica_state: ReplicaState v15+ tag 1
    replica_id: int32 = -1
    replica_epoch: int64 = -1
  max_wait_ms: int32
  min_bytes: int32
  max_bytes: int32 = 0x7fffffff
  isolation_level: int8 = 0
  session_id: int32 v7+ = 0
  session_epoch: int32 v7+ = -1
  topics: []FetchTopic
    topic: string v0-12
    topic_id: uuid v13+
    partitions: []FetchPartition
      partition: int32
      current_leader_epoch: int32 v9+ = -1
      fetch_offset: int64
      last_fetched_epoch: int32 v12+ = -1
      log_start_offset: int64 v5+ = -1
      partition_max_bytes: int32
      replica_directory_id: uuid v17+ tag 0
      high_watermark: int64 v18+ tag 1 = 9223372036854775807
  forgotten_topics_data: []ForgottenTopic v7+
    topic: string v7-12
    topic_id: uuid v13+
    partitions: []int32
  rack_id: string v11+ = ""

response
  throttle_time_ms: int32
  error_code: int16 v7+
  session_id: int32 v7+ = 0
  responses: []FetchableTopicResponse
    topic: string v0-12
    topic_id: uuid v13+
    partitions: []PartitionData
      partition_index: int32
      error_code: int16
      high_watermark: int64
      last_stable_offset: int64 = -1
      log_start_offset: int64 v5+ = -1
      diverging_epoch: EpochEndOffset v12+ tag 0
        epoch: int32 = -1
        end_offset: int64 = -1
      current_leader: LeaderIdAndEpoch v12+ tag 1
        leader_id: int32 = -1
        leader_epoch: int32 = -1
      snapshot_id: SnapshotId v12+ tag 2
        end_offset: int64 = -1
        epoch: int32 = -1
      aborted_transactions: []AbortedTransaction?
        producer_id: int64
        first_offset: int64
      preferred_read_replica: int32 v11+ = -1
      records: records?
  node_endpoints: []NodeEndpoint v16+ tag 0
    node_id: int32
    host: string
    port: int32
    rack: string? = null
"""

DECLARATIONS = [FETCH]
