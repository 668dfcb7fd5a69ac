"""The ``prune_<pipeline>__<destination>`` and ``reconcile_state_<pipeline>__<destination>`` jobs.

Owns the ops and their run config; prune and repair rules are ``distributor_core.app``'s.
"""
