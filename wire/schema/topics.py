"""Topic and partition administration: create, delete, grow, elect, reassign, log dirs."""

CREATE_TOPICS = """
CreateTopics 19 versions 2-7 flexible 5+

request
  topics: []CreatableTopic
    name: string
    num_partitions: int32
    replication_factor: int16
    assignments: []CreatableReplicaAssignment
      partition_index: int32
      broker_ids: []int32
    configs: []CreatableTopicConfig
      name: string
      value: string?
  timeout_ms: int32 = 60000
  validate_only: bool = false

response
  throttle_time_ms: int32
  topics: []CreatableTopicResult
    name: string
    topic_id: uuid v7+
    error_code: int16
    error_message: string?
    topic_config_error_code: int16 v5+ tag 0
    num_partitions: int32 v5+ = -1
    replication_factor: int16 v5+ = -1
    configs: []CreatableTopicConfigs? v5+
      name: string
      value: string?
      read_only: bool
      config_source: int8 = -1
      is_sensitive: bool
"""

DELETE_TOPICS = """
DeleteTopics 20 versions 1-6 flexible 4+

request
  topics: []DeleteTopicState v6+
    name: string? = null
    topic_id: uuid
  topic_names: []string v1-5
  timeout_ms: int32

response
  throttle_time_ms: int32
  responses: []DeletableTopicResult
    name: string nullable v6+
    topic_id: uuid v6+
    error_code: int16
    error_message: string? v5+ = null
"""

CREATE_PARTITIONS = """
CreatePartitions 37 versions 0-3 flexible 2+

request
  topics: []CreatePartitionsTopic
    name: string
    count: int32
    assignments: []CreatePartitionsAssignment?
      broker_ids: []int32
  timeout_ms: int32
  validate_only: bool

response
  throttle_time_ms: int32
  results: []CreatePartitionsTopicResult
    name: string
    error_code: int16
    error_message: string? = null
"""

ELECT_LEADERS = """
ElectLeaders 43 versions 0-2 flexible 2+

request
  election_type: int8 v1+
  topic_partitions: []TopicPartitions?
    topic: string
    partitions: []int32
  timeout_ms: int32 = 60000

response
  throttle_time_ms: int32
  error_code: int16 v1+
  replica_election_results: []ReplicaElectionResult
    topic: string
    partition_result: []PartitionResult
      partition_id: int32
      error_code: int16
      error_message: string?
"""

ALTER_PARTITION_REASSIGNMENTS = """
AlterPartitionReassignments 45 versions 0-1 flexible 0+

request
  timeout_ms: int32 = 60000
  allow_replication_factor_change: bool v1+ = true
  topics: []ReassignableTopic
    name: string
    partitions: []ReassignablePartition
      partition_index: int32
      replicas: []int32? = null

response
  throttle_time_ms: int32
  allow_replication_factor_change: bool v1+ = true
  error_code: int16
  error_message: string?
  responses: []ReassignableTopicResponse
    name: string
    partitions: []ReassignablePartitionResponse
      partition_index: int32
      error_code: int16
      error_message: string?
"""

LIST_PARTITION_REASSIGNMENTS = """
ListPartitionReassignments 46 versions 0 flexible 0+

request
  timeout_ms: int32 = 60000
  topics: []ListPartitionReassignmentsTopics? = null
    name: string
    partition_indexes: []int32

response
  throttle_time_ms: int32
  error_code: int16
  error_message: string?
  topics: []OngoingTopicReassignment
    name: string
    partitions: []OngoingPartitionReassignment
      partition_index: int32
      replicas: []int32
      adding_replicas: []int32
      removing_replicas: []int32
"""

DESCRIBE_LOG_DIRS = """
DescribeLogDirs 35 versions 1-5 flexible 2+

request
  topics: []DescribableLogDirTopic?
    topic: string
    partitions: []int32

response
  throttle_time_ms: int32
  error_code: int16 v3+
  results: []DescribeLogDirsResult
    error_code: int16
    log_dir: string
    topics: []DescribeLogDirsTopic
      name: string
      partitions: []DescribeLogDirsPartition
        partition_index: int32
        partition_size: int64
        offset_lag: int64
        is_future_key: bool
    total_bytes: int64 v4+ = -1
    usable_bytes: int64 v4+ = -1
    is_cordoned: bool v5+ = false
"""

DECLARATIONS = [
    CREATE_TOPICS,
    DELETE_TOPICS,
    CREATE_PARTITIONS,
    ELECT_LEADERS,
    ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS,
    DESCRIBE_LOG_DIRS,
]
