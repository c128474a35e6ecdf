"""Stand-in for slime's Sample (slime/utils/types.py at 624b824a), for tests only: the fields
cpverify's rollout generator sets and `to_dict`, nothing else. Standard library only."""

from dataclasses import dataclass, field
from enum import Enum


@dataclass
class Sample:
    group_index: int | None = None
    index: int | None = None
    prompt: str = ""
    tokens: list = field(default_factory=list)
    response_length: int = 0
    reward: float | None = None

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"

    status: Status = Status.PENDING

    def to_dict(self):
        value = self.__dict__.copy()
        value["status"] = self.status.value
        return value
