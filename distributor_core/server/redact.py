"""Moved to :mod:`distributor_core.staging.redact` (issue 16); alias kept for callers not yet moved."""

from distributor_core.staging.redact import host_redactions, scrub, staging_redactions

__all__ = ["host_redactions", "scrub", "staging_redactions"]
