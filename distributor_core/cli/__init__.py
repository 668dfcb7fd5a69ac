"""The ``distributor`` command-line interface.

``main(argv) -> int`` runs a command; ``console_main`` is the console-script entry point.
Commands live one per module in :mod:`distributor_core.cli.commands` (see that package).

Owns: argument parsing, text/JSON rendering and exit codes.

Must not know: business rules (it calls ``app``), Dagster.
"""

from distributor_core.cli.main import console_main, main

__all__ = ["console_main", "main"]
