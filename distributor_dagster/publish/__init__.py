"""The ``publish_<pipeline>`` job: discover → validate → ``publish_<d>`` per destination (→ ``report``
for uploads), the stages of the core's run sequence (:mod:`distributor_core.app.run`).

Owns the op definitions every publish graph shares (:mod:`.graph`, :mod:`.routes`) and the run
settings every step reads (:mod:`.config`); every decision is ``distributor_core.app``'s.
"""
