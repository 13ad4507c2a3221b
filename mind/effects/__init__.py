"""Pure effect contracts: tool schemas, approval policy, patch format, retry policy."""
