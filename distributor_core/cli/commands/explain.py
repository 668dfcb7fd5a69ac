"""``distributor explain [<class>]``: the troubleshooting entry of a refusal's failure class, from
the docs installed with distributor (as ``rustc --explain`` does)."""

from __future__ import annotations

from distributor_core.cli.errors import UsageError
from distributor_core.cli.spec import Command, Invocation, Positional


def run(inv: Invocation) -> int:
    from distributor_core.cli.explain import entry, failure_classes, page_path

    classes = failure_classes()
    name = inv.positional
    if name is None:
        if inv.out.json:
            inv.out.emit_envelope({"classes": list(classes), "page": str(page_path())})
            return 0
        inv.out.line("Failure classes (distributor explain <class> prints what to do):")
        for failure in classes:
            inv.out.line(f"  {failure}")
        inv.out.line(f"All of them, and other messages: {page_path()}")
        return 0
    failure = name.replace("-", "_")
    if failure not in classes:
        raise UsageError(f'explain: unknown failure class "{name}" (want one of {", ".join(classes)})')
    text = entry(failure)
    if text is None:  # a packaging fault: every class has an entry (tests/cli/test_explain.py)
        raise UsageError(f"explain: {page_path()} has no entry for {failure}")
    if inv.out.json:
        inv.out.emit_envelope({"class": failure, "entry": text, "page": f"{page_path()}#{failure.replace('_', '-')}"})
    else:
        inv.out.stdout.write(text)
        inv.out.line("")
        inv.out.line(f"(from {page_path()})")
    return 0


COMMAND = Command(
    name="explain",
    summary="Explain a refusal's failure class: cause, checks and fix",
    usage=("explain [<class>] [--format text|json]",),
    description=(
        "Prints the troubleshooting entry of a failure class (the class= of a Refusal: line, the\n"
        "class of a JSON refusal) from the documentation installed with distributor. Without a\n"
        "class, lists the classes."
    ),
    positional=Positional("<class>"),
    run=run,
)
