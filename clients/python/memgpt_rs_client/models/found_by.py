from enum import StrEnum


class FoundBy(StrEnum):
    CONTEXT = "context"
    MEANING = "meaning"
    WORDS = "words"

    def __str__(self) -> str:
        return str(self.value)
