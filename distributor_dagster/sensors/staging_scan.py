"""Finding the uploads a tick must request, cheaply (resolutions D1).

The cursor holds the highest admission ``seq`` handled and the accept stamp of its run id. A tick
first compares the staging path's ``.seq`` (the highest ``seq`` ever issued) with the cursor and
stops there when nothing was admitted. Otherwise it lists record directory names (no file reads)
and reads only the records whose run id stamp is not older than the cursor's stamp minus a
margin; older records were handled by earlier ticks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from distributor_core.server import staging

CURSOR_VERSION = 1
#: Records whose run id stamp is this much older than the cursor's are not read again (clock
#: adjustments between two admissions stay within it).
STAMP_MARGIN = timedelta(minutes=5)
_STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class UploadCursor:
    seq: int = 0
    stamp: str = ""

    @classmethod
    def parse(cls, text: str | None) -> UploadCursor:
        if not text:
            return cls()
        try:
            data = json.loads(text)
            if data.get("v") != CURSOR_VERSION:
                return cls()
            return cls(int(data.get("seq", 0)), str(data.get("stamp", "")))
        except (ValueError, TypeError, AttributeError):
            return cls()

    def format(self) -> str:
        return json.dumps({"v": CURSOR_VERSION, "seq": self.seq, "stamp": self.stamp}, separators=(",", ":"))


def _stamp(run_id: str) -> str:
    match = staging.RUN_ID_RE.fullmatch(run_id)
    return match["stamp"] if match else ""


def _window_start(stamp: str) -> str:
    """The oldest run id stamp a tick still reads (stamps sort as text)."""
    if not stamp:
        return ""
    moment = datetime.strptime(stamp, _STAMP_FORMAT) - STAMP_MARGIN
    return moment.strftime(_STAMP_FORMAT)


def issued_seq(staging_path: Path) -> int | None:
    """The highest ``seq`` the server ever issued for this staging path (``None`` when unknown)."""
    try:
        return int((staging_path / staging.SEQ_NAME).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


@dataclass
class UploadScan:
    pending: list[staging.UploadRecord] = field(default_factory=list)
    cursor: UploadCursor = field(default_factory=UploadCursor)
    read: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: True when ``.seq`` showed nothing new and no record was read
    idle: bool = False


def scan_staging(staging_path: Path, cursor: UploadCursor, *, max_requests: int) -> UploadScan:
    """Pending records admitted after ``cursor`` in ``seq`` order (at most ``max_requests``), and
    the cursor after them. Records admitted after the cursor that are no longer pending (another
    publisher or a manual run took them) are passed over."""
    issued = issued_seq(staging_path)
    if issued is not None and issued <= cursor.seq:
        return UploadScan(cursor=cursor, idle=True)
    since = _window_start(cursor.stamp)
    names = [name for name in staging.iter_run_ids(staging_path) if _stamp(name) >= since]
    scan = UploadScan(cursor=cursor)
    records: list[staging.UploadRecord] = []
    for run_id in names:
        try:
            record = staging.read_record(staging_path, run_id)
        except FileNotFoundError:
            continue
        except (OSError, staging.RecordError) as exc:
            scan.errors.append((run_id, str(exc)))
            continue
        scan.read += 1
        if record.seq > cursor.seq:
            records.append(record)
    records.sort(key=lambda r: (r.seq, r.run_id))
    for record in records:
        if record.pending:
            if len(scan.pending) >= max_requests:
                break
            scan.pending.append(record)
        scan.cursor = UploadCursor(record.seq, _stamp(record.run_id))
    return scan


