"""The ``prune_<pipeline>__<destination>`` and ``reconcile_state_<pipeline>__<destination>`` jobs."""
