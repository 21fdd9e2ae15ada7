from enum import StrEnum


class ErrorCode(StrEnum):
    ADMIN_ONLY = "admin_only"
    ALREADY_EXISTS = "already_exists"
    APPROVAL_PENDING = "approval_pending"
    BAD_JSON = "bad_json"
    BLOCK_EDIT_REJECTED = "block_edit_rejected"
    BLOCK_OVER_LIMIT = "block_over_limit"
    BODY_TOO_LARGE = "body_too_large"
    CONFLICT = "conflict"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    INTERNAL = "internal"
    INVALID_CONFIG = "invalid_config"
    INVALID_INPUT = "invalid_input"
    LLM_ERROR = "llm_error"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NOT_FOUND = "not_found"
    TIMEOUT = "timeout"
    TOO_LARGE = "too_large"
    UNAUTHORIZED = "unauthorized"
    UNAVAILABLE = "unavailable"
    UNKNOWN_FIELD = "unknown_field"
    UNKNOWN_POLICY = "unknown_policy"
    UNKNOWN_TOOL = "unknown_tool"

    def __str__(self) -> str:
        return str(self.value)
