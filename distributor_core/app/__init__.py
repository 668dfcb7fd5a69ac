"""Use cases shared by the CLI, the upload server and Dagster.

Owns: the use cases (``run``, ``reconcile_state``, ``prune``), bundle selection, the mapping of a
configured destination to planning's policy, report objects with ``to_dict()``.

Must not know: HTTP, argument parsing, terminal rendering, Dagster; how a destination is written
(that is ``execute``) or decided (``plan``).
"""
