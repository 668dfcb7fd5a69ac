"""Moved to :mod:`distributor_core.staging` (issue 16): this alias stays only until every caller
imports the new package. The Dagster layer must not import ``distributor_core.server``."""

from distributor_core.staging import *  # noqa: F403
from distributor_core.staging import __all__  # noqa: F401
