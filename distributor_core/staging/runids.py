"""Upload run ids: ``<pipeline id>.<UTC time as YYYYMMDDTHHMMSSZ>.<8 lowercase hex>`` (interfaces §3.7)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from datetime import datetime

from distributor_core.timefmt import compact_stamp

#: ``<pipeline id>.<YYYYMMDDTHHMMSSZ>.<8 lowercase hex>``
RUN_ID_RE = re.compile(r"(?P<pipeline>[A-Za-z0-9][A-Za-z0-9._-]*)\.(?P<stamp>[0-9]{8}T[0-9]{6}Z)\.[0-9a-f]{8}")

#: returns 8 lowercase hex characters; injectable so tests get predictable ids
RandomSuffix = Callable[[], str]


def is_run_id(value: str) -> bool:
    return RUN_ID_RE.fullmatch(value) is not None


def run_id_pipeline(run_id: str) -> str | None:
    """The pipeline id a run id was issued for, or ``None`` when it is not a run id."""
    match = RUN_ID_RE.fullmatch(run_id)
    return match["pipeline"] if match else None


def run_id_stamp(run_id: str) -> str:
    """The ``YYYYMMDDTHHMMSSZ`` of a run id, ``""`` for other names."""
    match = RUN_ID_RE.fullmatch(run_id)
    return match["stamp"] if match else ""


def random_suffix() -> str:
    return secrets.token_hex(4)


def new_run_id(pipeline_id: str, now: datetime, suffix: RandomSuffix = random_suffix) -> str:
    run_id = f"{pipeline_id}.{compact_stamp(now)}.{suffix()}"
    if not is_run_id(run_id):
        raise ValueError(f"random suffix source produced an invalid run id {run_id!r}")
    return run_id
