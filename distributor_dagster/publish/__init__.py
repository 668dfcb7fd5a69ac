"""The ``publish_<pipeline>`` job: discover → validate → plan/execute per destination → report.

Owns the ops and their run config; every decision is ``distributor_core.app``'s.
"""
