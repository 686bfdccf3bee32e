"""Transactions: producer ids, transaction membership, commit/abort and inspection."""

INIT_PRODUCER_ID = """
InitProducerId 22 versions 0-6 flexible 2+

request
  transactional_id: string?
  transaction_timeout_ms: int32
  producer_id: int64 v3+ = -1
  producer_epoch: int16 v3+ = -1
  enable2_pc: bool v6+ = false
  keep_prepared_txn: bool v6+ = false

response
  throttle_time_ms: int32
  error_code: int16
  producer_id: int64 = -1
  producer_epoch: int16
  ongoing_txn_producer_id: int64 v6+ = -1
  ongoing_txn_producer_epoch: int16 v6+ = -1
"""

ADD_PARTITIONS_TO_TXN = """
AddPartitionsToTxn 24 versions 0-5 flexible 3+

request
  transactions: []AddPartitionsToTxnTransaction v4+
    transactional_id: string
    producer_id: int64
    producer_epoch: int16
    verify_only: bool = false
    topics: []AddPartitionsToTxnTopic
  v3_and_below_transactional_id: string v0-3
  v3_and_below_producer_id: int64 v0-3
  v3_and_below_producer_epoch: int16 v0-3
  v3_and_below_topics: []AddPartitionsToTxnTopic v0-3

response
  throttle_time_ms: int32
  error_code: int16 v4+
  results_by_transaction: []AddPartitionsToTxnResult v4+
    transactional_id: string
    topic_results: []AddPartitionsToTxnTopicResult
  results_by_topic_v3_and_below: []AddPartitionsToTxnTopicResult v0-3

struct AddPartitionsToTxnTopic
  name: string
  partitions: []int32

struct AddPartitionsToTxnTopicResult
  name: string
  results_by_partition: []AddPartitionsToTxnPartitionResult

struct AddPartitionsToTxnPartitionResult
  partition_index: int32
  partition_error_code: int16
"""

ADD_OFFSETS_TO_TXN = """
AddOffsetsToTxn 25 versions 0-4 flexible 3+

request
  transactional_id: string
  producer_id: int64
  producer_epoch: int16
  group_id: string

response
  throttle_time_ms: int32
  error_code: int16
"""

END_TXN = """
EndTxn 26 versions 0-5 flexible 3+

request
  transactional_id: string
  producer_id: int64
  producer_epoch: int16
  committed: bool

response
  throttle_time_ms: int32
  error_code: int16
  producer_id: int64 v5+ = -1
  producer_epoch: int16 v5+ = -1
"""

WRITE_TXN_MARKERS = """
WriteTxnMarkers 27 versions 1-2 flexible 1+

request
  markers: []WritableTxnMarker
    producer_id: int64
    producer_epoch: int16
    transaction_result: bool
    topics: []WritableTxnMarkerTopic
      name: string
      partition_indexes: []int32
    coordinator_epoch: int32
    transaction_version: int8 v2+ = 0

response
  markers: []WritableTxnMarkerResult
    producer_id: int64
    topics: []WritableTxnMarkerTopicResult
      name: string
      partitions: []WritableTxnMarkerPartitionResult
        partition_index: int32
        error_code: int16
"""

TXN_OFFSET_COMMIT = """
TxnOffsetCommit 28 versions 0-6 flexible 3+

request
  transactional_id: string
  group_id: string
  producer_id: int64
  producer_epoch: int16
  generation_id: int32 v3+ = -1
  member_id: string v3+ = ""
  group_instance_id: string? v3+ = null
  topics: []TxnOffsetCommitRequestTopic
    name: string v0-5
    topic_id: uuid v6+
    partitions: []TxnOffsetCommitRequestPartition
      partition_index: int32
      committed_offset: int64
      committed_leader_epoch: int32 v2+ = -1
      committed_metadata: string?

response
  throttle_time_ms: int32
  topics: []TxnOffsetCommitResponseTopic
    name: string v0-5
    topic_id: uuid v6+
    partitions: []TxnOffsetCommitResponsePartition
      partition_index: int32
      error_code: int16
"""

DESCRIBE_PRODUCERS = """
DescribeProducers 61 versions 0 flexible 0+

request
  topics: []TopicRequest
    name: string
    partition_indexes: []int32

response
  throttle_time_ms: int32
  topics: []TopicResponse
    name: string
    partitions: []PartitionResponse
      partition_index: int32
      error_code: int16
      error_message: string? = null
      active_producers: []ProducerState
        producer_id: int64
        producer_epoch: int32
        last_sequence: int32 = -1
        last_timestamp: int64 = -1
        coordinator_epoch: int32
        current_txn_start_offset: int64 = -1
"""

DESCRIBE_TRANSACTIONS = """
DescribeTransactions 65 versions 0 flexible 0+

request
  transactional_ids: []string

response
  throttle_time_ms: int32
  transaction_states: []TransactionState
    error_code: int16
    transactional_id: string
    transaction_state: string
    transaction_timeout_ms: int32
    transaction_start_time_ms: int64
    producer_id: int64
    producer_epoch: int16
    topics: []TopicData
      topic: string
      partitions: []int32
"""

LIST_TRANSACTIONS = """
ListTransactions 66 versions 0-2 flexible 0+

request
  state_filters: []string
  producer_id_filters: []int64
  duration_filter: int64 v1+ = -1
  transactional_id_pattern: string? v2+ = null

response
  throttle_time_ms: int32
  error_code: int16
  unknown_state_filters: []string
  transaction_states: []TransactionState
    transactional_id: string
    producer_id: int64
    transaction_state: string
"""

DECLARATIONS = [
    INIT_PRODUCER_ID,
    ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    WRITE_TXN_MARKERS,
    TXN_OFFSET_COMMIT,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
]
