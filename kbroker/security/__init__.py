"""Security: TLS and SASL listeners, credentials, the ACL authorizer and client quotas."""
