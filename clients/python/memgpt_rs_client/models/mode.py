from enum import StrEnum


class Mode(StrEnum):
    HYBRID = "hybrid"
    TEXT = "text"
    VECTOR = "vector"

    def __str__(self) -> str:
        return str(self.value)
