"""Execution: the destination lock, the intent journal, recovery and the write protocol
(resolutions A1–A3), and the reading of a destination's facts for planning.

Owns: :mod:`.request` (``PlanRequest``: one bundle, one destination, the storages),
:mod:`.facts` (reads the state file and answers ``plan.decide``'s fact requests: the only place
planning meets storage), :mod:`.publish` (lock → recover → plan → execute, or plan only),
:mod:`.executor`, :mod:`.statebuild`, :mod:`.journal`, :mod:`.lock`.

Must not know: the app layer (configs, reports, bundle discovery), the server, the CLI,
Dagster; which backend it writes to beyond the ``storage.base.Storage`` protocol.
"""
