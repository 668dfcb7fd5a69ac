"""The ``publish_<pipeline>`` job: discover → validate → ``publish_<d>`` per destination (→ ``report``
for uploads), the stages of the core's run sequence (:mod:`distributor_core.app.run`).

Owns the ops and their run config; every decision is ``distributor_core.app``'s.
"""
