"""Access control lists: describe, create, delete."""

DESCRIBE_ACLS = """
DescribeAcls 29 versions 1-3 flexible 2+

request
  resource_type_filter: int8
  resource_name_filter: string?
  pattern_type_filter: int8 = 3
  principal_filter: string?
  host_filter: string?
  operation: int8
  permission_type: int8

response
  throttle_time_ms: int32
  error_code: int16
  error_message: string?
  resources: []DescribeAclsResource
    resource_type: int8
    resource_name: string
    pattern_type: int8 = 3
    acls: []AclDescription
      principal: string
      host: string
      operation: int8
      permission_type: int8
"""

CREATE_ACLS = """
CreateAcls 30 versions 1-3 flexible 2+

request
  creations: []AclCreation
    resource_type: int8
    resource_name: string
    resource_pattern_type: int8 = 3
    principal: string
    host: string
    operation: int8
    permission_type: int8

response
  throttle_time_ms: int32
  results: []AclCreationResult
    error_code: int16
    error_message: string?
"""

DELETE_ACLS = """
DeleteAcls 31 versions 1-3 flexible 2+

request
  filters: []DeleteAclsFilter
    resource_type_filter: int8
    resource_name_filter: string?
    pattern_type_filter: int8 = 3
    principal_filter: string?
    host_filter: string?
    operation: int8
    permission_type: int8

response
  throttle_time_ms: int32
  filter_results: []DeleteAclsFilterResult
    error_code: int16
    error_message: string?
    matching_acls: []DeleteAclsMatchingAcl
      error_code: int16
      error_message: string?
      resource_type: int8
      resource_name: string
      pattern_type: int8 = 3
      principal: string
      host: string
      operation: int8
      permission_type: int8
"""

DECLARATIONS = [DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS]
