"""Broker and topic configuration: describe, alter, incrementally alter."""

DESCRIBE_CONFIGS = """
DescribeConfigs 32 versions 1-4 flexible 4+

request
  resources: []DescribeConfigsResource
    resource_type: int8
    resource_name: string
    configuration_keys: []string?
  include_synonyms: bool = false
  include_documentation: bool v3+ = false

response
  throttle_time_ms: int32
  results: []DescribeConfigsResult
    error_code: int16
    error_message: string?
    resource_type: int8
    resource_name: string
    configs: []DescribeConfigsResourceResult
      name: string
      value: string?
      read_only: bool
      config_source: int8 = -1
      is_sensitive: bool
      synonyms: []DescribeConfigsSynonym
        name: string
        value: string?
        source: int8
      config_type: int8 v3+ = 0
      documentation: string? v3+
"""

ALTER_CONFIGS = """
AlterConfigs 33 versions 0-2 flexible 2+

request
  resources: []AlterConfigsResource
    resource_type: int8
    resource_name: string
    configs: []AlterableConfig
      name: string
      value: string?
  validate_only: bool

response
  throttle_time_ms: int32
  responses: []AlterConfigsResourceResponse
    error_code: int16
    error_message: string?
    resource_type: int8
    resource_name: string
"""

INCREMENTAL_ALTER_CONFIGS = """
IncrementalAlterConfigs 44 versions 0-1 flexible 1+

request
  resources: []AlterConfigsResource
    resource_type: int8
    resource_name: string
    configs: []AlterableConfig
      name: string
      config_operation: int8
      value: string?
  validate_only: bool

response
  throttle_time_ms: int32
  responses: []AlterConfigsResourceResponse
    error_code: int16
    error_message: string?
    resource_type: int8
    resource_name: string
"""

DECLARATIONS = [DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS]
