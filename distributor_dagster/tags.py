"""Run tag values every Dagster storage can index (issue 35, item 6).

Dagster keeps run tags in a table indexed on ``(key, value)``; PostgreSQL refuses an index row
over 2,704 bytes, so one long value (a bundle id, a batch's run key) fails the sensor tick that
launches the run, and Dagster's retry then launches it with none of its tags. A value longer than
:data:`MAX_TAG_VALUE_BYTES` is shortened to its first bytes, ``…`` and the sha256 of the whole
value: still readable in the UI, still unique, the same for the same value (so a filter by it
finds the run). The full value stays where nothing indexes it: the run's config (the upload run
ids), the upload record and the materialization metadata (``source_id``).
"""

from __future__ import annotations

import hashlib

#: the longest tag value kept as it is (UTF-8 bytes)
MAX_TAG_VALUE_BYTES = 255
#: bytes of a long value kept in front of its hash
_KEPT_BYTES = MAX_TAG_VALUE_BYTES - len("…sha256:".encode()) - 64


def tag_value(value: str) -> str:
    """``value`` when it is at most :data:`MAX_TAG_VALUE_BYTES` long, else its shortened form
    ``<first bytes>…sha256:<hex of the whole value>``."""
    data = value.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_TAG_VALUE_BYTES:
        return value
    kept = data[:_KEPT_BYTES].decode("utf-8", "ignore")  # never half a character
    return f"{kept}…sha256:{hashlib.sha256(data).hexdigest()}"


def tag_values(tags: dict[str, str]) -> dict[str, str]:
    """Every value of ``tags`` through :func:`tag_value`."""
    return {key: tag_value(value) for key, value in tags.items()}
