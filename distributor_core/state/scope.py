"""Who works on a destination bundle path: the (pipeline id, destination id) pair that owns state
(core-semantics §2), a value the state model records and the state errors name."""

from __future__ import annotations

import msgspec


class OwnerScope(msgspec.Struct, frozen=True, order=True):
    """The (pipeline id, destination id) pair doing the work; rendered ``P/D``."""

    pipeline_id: str
    destination_id: str

    def __str__(self) -> str:
        return f"{self.pipeline_id}/{self.destination_id}"

    def to_dict(self) -> dict[str, str]:
        return {"pipeline_id": self.pipeline_id, "destination_id": self.destination_id}


__all__ = ["OwnerScope"]
