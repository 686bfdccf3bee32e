"""Offsets: ListOffsets, OffsetForLeaderEpoch and DeleteRecords."""

# v0's max_num_offsets and old_style_offsets are gone with v0 (KIP-896).
LIST_OFFSETS = """
ListOffsets 2 versions 1-11 flexible 6+

request
  replica_id: int32
  isolation_level: int8 v2+
  topics: []ListOffsetsTopic
    name: string
    partitions: []ListOffsetsPartition
      partition_index: int32
      current_leader_epoch: int32 v4+ = -1
      timestamp: int64
  timeout_ms: int32 v10+

response
  throttle_time_ms: int32 v2+
  topics: []ListOffsetsTopicResponse
    name: string
    partitions: []ListOffsetsPartitionResponse
      partition_index: int32
      error_code: int16
      timestamp: int64 = -1
      offset: int64 = -1
      leader_epoch: int32 v4+ = -1
"""

OFFSET_FOR_LEADER_EPOCH = """
OffsetForLeaderEpoch 23 versions 2-4 flexible 4+

request
  replica_id: int32 v3+ = -2
  topics: []OffsetForLeaderTopic
    topic: string
    partitions: []OffsetForLeaderPartition
      partition: int32
      current_leader_epoch: int32 = -1
      leader_epoch: int32

response
  throttle_time_ms: int32
  topics: []OffsetForLeaderTopicResult
    topic: string
    partitions: []EpochEndOffset
      error_code: int16
      partition: int32
      leader_epoch: int32 = -1
      end_offset: int64 = -1
"""

DELETE_RECORDS = """
DeleteRecords 21 versions 0-2 flexible 2+

request
  topics: []DeleteRecordsTopic
    name: string
    partitions: []DeleteRecordsPartition
      partition_index: int32
      offset: int64
  timeout_ms: int32

response
  throttle_time_ms: int32
  topics: []DeleteRecordsTopicResult
    name: string
    partitions: []DeleteRecordsPartitionResult
      partition_index: int32
      low_watermark: int64
      error_code: int16
"""

DECLARATIONS = [LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, DELETE_RECORDS]
