"""Unmanaged entry reporting for ``reconcile-state`` (core-semantics §7.1.1, resolutions A1, B2).

One bounded walk of the bundle path. Directories are skipped; reserved names
(``.distributor.json``, ``.distributor.pending.json``, ``.distributor.lock``,
``.distributor-tmp-*``, ``.distributor-bak-*``) are invisible wherever they appear; recorded
managed paths of every owner are excluded; and so is everything inside a nested bundle path that
holds its own ``.distributor.json`` (its files are managed by that state, not unmanaged here).
The rest is reported sorted by path, relative to the bundle path. Hitting the bound stops the
walk and sets ``truncated`` instead of failing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from distributor_core import paths as lp
from distributor_core.storage.base import Storage

#: Bound of the unmanaged-entry walk (resolutions B2).
UNMANAGED_WALK_LIMIT = 1_000_000


class UnmanagedEntry(msgspec.Struct, frozen=True):
    path: str
    type: str
    size: int = 0
    #: why adoption left it unmanaged (``reconcile-state --adopt`` only)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "type": self.type}
        if self.size:
            data["size"] = self.size
        if self.reason:
            data["reason"] = self.reason
        return data


def unmanaged_entries(
    storage: Storage,
    bundle_path: str,
    managed: Iterable[str],
    *,
    limit: int = UNMANAGED_WALK_LIMIT,
) -> tuple[list[UnmanagedEntry], bool]:
    """``(entries sorted by path, truncated)`` for the bundle path (paths bundle-relative)."""
    result = storage.scan(bundle_path, limit=limit, include_reserved=True, include_dirs=False)
    relative = [(lp.relative_to(entry.path, bundle_path), entry) for entry in result.entries]
    nested = {
        lp.parent(rel) for rel, _ in relative if lp.basename(rel) == lp.STATE_FILE_NAME and lp.parent(rel) != ""
    }
    excluded = set(managed)
    found: list[UnmanagedEntry] = []
    for rel, entry in relative:
        if lp.is_reserved_path(rel) or rel in excluded:
            continue
        if nested and _inside(rel, nested):
            continue
        found.append(UnmanagedEntry(rel, entry.type, entry.size))
    found.sort(key=lambda item: item.path)
    return found, result.truncated


def _inside(path: str, roots: set[str]) -> bool:
    """True when a proper ancestor directory of ``path`` is one of ``roots``."""
    directory = lp.parent(path)
    while directory:
        if directory in roots:
            return True
        directory = lp.parent(directory)
    return False
