"""Metadata: Metadata, DescribeCluster and DescribeTopicPartitions."""

METADATA = """
Metadata 3 versions 0-13 flexible 9+

request
  topics: []MetadataRequestTopic nullable v1+
    topic_id: uuid v10+
    name: string nullable v10+
  allow_auto_topic_creation: bool v4+ = true
  include_cluster_authorized_operations: bool v8-10
  include_topic_authorized_operations: bool v8+

response
  throttle_time_ms: int32 v3+
  brokers: []MetadataResponseBroker
    node_id: int32
    host: string
    port: int32
    rack: string? v1+ = null
  cluster_id: string? v2+ = null
  controller_id: int32 v1+ = -1
  topics: []MetadataResponseTopic
    error_code: int16
    name: string nullable v12+
    topic_id: uuid v10+
    is_internal: bool v1+ = false
    partitions: []MetadataResponsePartition
      error_code: int16
      partition_index: int32
      leader_id: int32
      leader_epoch: int32 v7+ = -1
      replica_nodes: []int32
      isr_nodes: []int32
      offline_replicas: []int32 v5+
    topic_authorized_operations: int32 v8+ = -2147483648
  cluster_authorized_operations: int32 v8-10 = -2147483648
  error_code: int16 v13+
"""

DESCRIBE_CLUSTER = """
DescribeCluster 60 versions 0-2 flexible 0+

request
  include_cluster_authorized_operations: bool
  endpoint_type: int8 v1+ = 1
  include_fenced_brokers: bool v2+

response
  throttle_time_ms: int32
  error_code: int16
  error_message: string? = null
  endpoint_type: int8 v1+ = 1
  cluster_id: string
  controller_id: int32 = -1
  brokers: []DescribeClusterBroker
    broker_id: int32
    host: string
    port: int32
    rack: string? = null
    is_fenced: bool v2+
  cluster_authorized_operations: int32 = -2147483648
"""

DESCRIBE_TOPIC_PARTITIONS = """
DescribeTopicPartitions 75 versions 0 flexible 0+

request
  topics: []TopicRequest
    name: string
  response_partition_limit: int32 = 2000
  cursor: Cursor? = null
    topic_name: string
    partition_index: int32

response
  throttle_time_ms: int32
  topics: []DescribeTopicPartitionsResponseTopic
    error_code: int16
    name: string?
    topic_id: uuid
    is_internal: bool = false
    partitions: []DescribeTopicPartitionsResponsePartition
      error_code: int16
      partition_index: int32
      leader_id: int32
      leader_epoch: int32 = -1
      replica_nodes: []int32
      isr_nodes: []int32
      eligible_leader_replicas: []int32? = null
      last_known_elr: []int32? = null
      offline_replicas: []int32
    topic_authorized_operations: int32 = -2147483648
  next_cursor: Cursor? = null
    topic_name: string
    partition_index: int32
"""

DECLARATIONS = [METADATA, DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS]
