from enum import StrEnum


class LoopStyle(StrEnum):
    HEARTBEAT = "heartbeat"
    UNTIL_REPLY = "until_reply"

    def __str__(self) -> str:
        return str(self.value)
