from enum import StrEnum


class StreamMessageResponse200Type1Event(StrEnum):
    ERROR = "error"
    FLUSH = "flush"
    MESSAGE = "message"
    REPLY_DELTA = "reply_delta"
    STEP = "step"
    THINKING_DELTA = "thinking_delta"

    def __str__(self) -> str:
        return str(self.value)
