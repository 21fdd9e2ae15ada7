from enum import StrEnum


class EventType(StrEnum):
    APPROVAL = "approval"
    LOGIN = "login"
    SYSTEM_ALERT = "system_alert"
    TIMER = "timer"
    USER = "user"

    def __str__(self) -> str:
        return str(self.value)
