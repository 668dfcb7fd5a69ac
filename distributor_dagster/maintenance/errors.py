"""What fails one destination (or bundle path) of a maintenance run without stopping the others."""

from __future__ import annotations

from distributor_core.app.bundles import BUNDLE_ERRORS
from distributor_core.app.selection import SelectionError
from distributor_core.config import ConfigLookupError

MAINTENANCE_ERRORS: tuple[type[Exception], ...] = (*BUNDLE_ERRORS, SelectionError, ConfigLookupError)
