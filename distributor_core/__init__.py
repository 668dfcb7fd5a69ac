"""distributor core library: every rule of distributor, and the I/O shells around them.

Owns the bundle contract, config, state, comparison, planning, the write protocol, repair and
prune, the storage adapters, the CLI, the upload server and the producer client (the module map
and layers are in ``docs/internal/architecture.md``; ``lint-imports`` checks them).

Must not know: Dagster. Nothing under ``distributor_core`` imports ``dagster`` or
``distributor_dagster`` (the Dagster run-status overlay of ``serve --publisher dagster`` is
found through the entry point group ``distributor.run_status``, see ``server.runstatus``).
"""

__version__ = "0.1.0"
