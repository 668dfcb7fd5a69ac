"""One module per command. A module defines ``COMMAND = Command(...)`` (see
:mod:`distributor_core.cli.spec`) and is picked up by :mod:`distributor_core.cli.registry`
automatically; root help lists it in ``registry.HELP_ORDER`` order.

Minimal example (``commands/hello.py``)::

    from distributor_core.cli.spec import Command, Flag, Invocation

    def run(inv: Invocation) -> int:
        if inv.out.json:
            inv.out.emit_envelope({"greeting": "hello"})
        else:
            inv.out.record("Hello", name=inv.args.name or "world")
        return 0

    COMMAND = Command(
        name="hello",
        summary="Say hello",
        usage=("hello [--name <name>] [--format text|json]",),
        flags=(Flag("--name", "who to greet", metavar="<name>"),),
        run=run,
    )

The framework has already handled ``--help``, flag errors, positional arguments and
``--format`` before ``run`` is called; check required flags next with
``inv.require("--config", "--pipeline")`` (``distributor: <command> requires --config``).
Use ``inv.out`` for all output: ``record(label, **fields)`` for text lines,
``emit_envelope(result, ok=..., error=..., warnings=...)`` for JSON, ``diagnostic(msg)`` for
stderr lines and ``progress(label, total)`` for terminal-only progress. Raise ``UsageError``
(exit 2, before writing stdout) or ``CommandError`` (exit 1) from ``distributor_core.cli.errors``;
any other exception is printed as ``distributor: <message>`` with exit 1. Modules whose name
starts with ``_`` are helpers, not commands.
"""
