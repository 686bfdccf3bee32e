"""ApiVersions and the SASL handshake."""

API_VERSIONS = """
ApiVersions 18 versions 0-5 flexible 3+

request
  client_software_name: string v3+
  client_software_version: string v3+
  cluster_id: string? v5+ = null
  node_id: int32 v5+ = -1

response
  error_code: int16
  api_keys: []ApiVersion
    api_key: int16
    min_version: int16
    max_version: int16
  throttle_time_ms: int32 v1+
  supported_features: []SupportedFeatureKey v3+ tag 0
    name: string
    min_version: int16
    max_version: int16
  finalized_features_epoch: int64 v3+ tag 1 = -1
  finalized_features: []FinalizedFeatureKey v3+ tag 2
    name: string
    max_version_level: int16
    min_version_level: int16
  zk_migration_ready: bool v3+ tag 3 = false
"""

SASL_HANDSHAKE = """
SaslHandshake 17 versions 0-1 flexible none

request
  mechanism: string

response
  error_code: int16
  mechanisms: []string
"""

SASL_AUTHENTICATE = """
SaslAuthenticate 36 versions 0-2 flexible 2+

request
  auth_bytes: bytes

response
  error_code: int16
  error_message: string?
  auth_bytes: bytes
  session_lifetime_ms: int64 v1+
"""

DECLARATIONS = [API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE]
