"""Client quotas and SCRAM user credentials."""

DESCRIBE_CLIENT_QUOTAS = """
DescribeClientQuotas 48 versions 0-1 flexible 1+

request
  components: []ComponentData
    entity_type: string
    match_type: int8
    match: string?
  strict: bool

response
  throttle_time_ms: int32
  error_code: int16
  error_message: string?
  entries: []EntryData?
    entity: []EntityData
      entity_type: string
      entity_name: string?
    values: []ValueData
      key: string
      value: float64
"""

ALTER_CLIENT_QUOTAS = """
AlterClientQuotas 49 versions 0-1 flexible 1+

request
  entries: []EntryData
    entity: []EntityData
      entity_type: string
      entity_name: string?
    ops: []OpData
      key: string
      value: float64
      remove: bool
  validate_only: bool

response
  throttle_time_ms: int32
  entries: []EntryData
    error_code: int16
    error_message: string?
    entity: []EntityData
      entity_type: string
      entity_name: string?
"""

DESCRIBE_USER_SCRAM_CREDENTIALS = """
DescribeUserScramCredentials 50 versions 0 flexible 0+

request
  users: []UserName?
    name: string

response
  throttle_time_ms: int32
  error_code: int16
  error_message: string?
  results: []DescribeUserScramCredentialsResult
    user: string
    error_code: int16
    error_message: string?
    credential_infos: []CredentialInfo
      mechanism: int8
      iterations: int32
"""

ALTER_USER_SCRAM_CREDENTIALS = """
AlterUserScramCredentials 51 versions 0 flexible 0+

request
  deletions: []ScramCredentialDeletion
    name: string
    mechanism: int8
  upsertions: []ScramCredentialUpsertion
    name: string
    mechanism: int8
    iterations: int32
    salt: bytes
    salted_password: bytes

response
  throttle_time_ms: int32
  results: []AlterUserScramCredentialsResult
    user: string
    error_code: int16
    error_message: string?
"""

DECLARATIONS = [
    DESCRIBE_CLIENT_QUOTAS,
    ALTER_CLIENT_QUOTAS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ALTER_USER_SCRAM_CREDENTIALS,
]
