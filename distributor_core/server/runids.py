"""Upload run ids: ``<pipeline id>.<UTC time as YYYYMMDDTHHMMSSZ>.<8 lowercase hex>`` (interfaces §3.7)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime

from distributor_core.server.staging import is_run_id
from distributor_core.timefmt import compact_stamp

#: returns 8 lowercase hex characters; injectable so tests get predictable ids
RandomSuffix = Callable[[], str]


def random_suffix() -> str:
    return secrets.token_hex(4)


def new_run_id(pipeline_id: str, now: datetime, suffix: RandomSuffix = random_suffix) -> str:
    run_id = f"{pipeline_id}.{compact_stamp(now)}.{suffix()}"
    if not is_run_id(run_id):
        raise ValueError(f"random suffix source produced an invalid run id {run_id!r}")
    return run_id
