"""What fails one bundle path's digest audit (the check ``outputs_match_digests``) as a failed check
rather than a failed step: the maintenance operations' own errors and a bad selection."""

from __future__ import annotations

from distributor_core.app.bundles import BUNDLE_ERRORS
from distributor_core.app.selection import SelectionError
from distributor_core.config import ConfigLookupError

MAINTENANCE_ERRORS: tuple[type[Exception], ...] = (*BUNDLE_ERRORS, SelectionError, ConfigLookupError)
