"""``distributor version [--format text|json]`` (interfaces §2.4)."""

from __future__ import annotations

from distributor_core import __version__
from distributor_core.cli.spec import Command, Invocation


def run(inv: Invocation) -> int:
    if inv.out.json:
        inv.out.emit_envelope({"name": "distributor", "version": __version__})
    else:
        inv.out.line(f"distributor {__version__}")
    return 0


COMMAND = Command(
    name="version",
    summary="Print version information",
    usage=("version [--format text|json]",),
    run=run,
)
