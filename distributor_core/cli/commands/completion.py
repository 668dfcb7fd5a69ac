"""``distributor completion bash|zsh``: the shell completion script on stdout."""

from __future__ import annotations

from distributor_core.cli.errors import UsageError
from distributor_core.cli.spec import Command, Invocation, Positional


def run(inv: Invocation) -> int:
    from distributor_core.cli import registry
    from distributor_core.cli.completion import SHELLS, script
    from distributor_core.cli.explain import failure_classes

    shell = inv.positional or ""
    if shell not in SHELLS:
        raise UsageError(f"completion: unknown shell {shell!r} (want bash or zsh)")
    arguments = {"explain": failure_classes(), "completion": SHELLS}
    inv.out.stdout.write(script(shell, registry.all_commands(), arguments))
    return 0


COMMAND = Command(
    name="completion",
    summary="Print the shell completion script for bash or zsh",
    usage=("completion bash|zsh",),
    description=(
        "Completes commands, subcommands, flags, their choices and file names.\n\n"
        "bash, in this shell:      source <(distributor completion bash)\n"
        "bash, every new shell:    mkdir -p ~/.local/share/bash-completion/completions\n"
        "                          distributor completion bash \\\n"
        "                              > ~/.local/share/bash-completion/completions/distributor\n"
        "zsh, in this shell:       source <(distributor completion zsh)\n"
        "zsh, every new shell:     mkdir -p ~/.zfunc; distributor completion zsh > ~/.zfunc/_distributor\n"
        "                          and in ~/.zshrc: fpath=(~/.zfunc $fpath); autoload -U compinit; compinit"
    ),
    positional=Positional("bash|zsh", required=True),
    formats=False,
    run=run,
)
