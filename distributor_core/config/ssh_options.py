"""Which extra OpenSSH options an ``ssh`` backend with ``transport: openssh`` may set.

``ssh_options`` become ``-o Option=value`` arguments of the ``ssh`` client. Options that would
weaken host-key checking, let ``ssh`` prompt, open forwardings or change what the session runs
are refused, naming the option and the field that sets the same thing safely. The storage
transport checks the same table again, so a storage object built without a config file is held
to the same rules. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType

_HOST_KEYS = "host keys are checked strictly against known_hosts_file (host_key_policy decides about unknown keys)"
_FORWARDING = "distributor opens no forwardings over its SFTP connections"
_SESSION = "the session must run the sftp subsystem and nothing else"

#: lower-case option name -> why it is refused
REFUSED_OPTIONS: Mapping[str, str] = MappingProxyType(
    {
        "stricthostkeychecking": _HOST_KEYS,
        "userknownhostsfile": _HOST_KEYS,
        "globalknownhostsfile": _HOST_KEYS,
        "knownhostscommand": _HOST_KEYS,
        "verifyhostkeydns": _HOST_KEYS,
        "updatehostkeys": "known_hosts_file is only written by host_key_policy: accept_new",
        "batchmode": "ssh never prompts when distributor runs it (BatchMode yes)",
        "forwardagent": "forwarding the agent would hand its keys to the server",
        "forwardx11": _FORWARDING,
        "forwardx11trusted": _FORWARDING,
        "localforward": _FORWARDING,
        "remoteforward": _FORWARDING,
        "dynamicforward": _FORWARDING,
        "tunnel": _FORWARDING,
        "tunneldevice": _FORWARDING,
        "gatewayports": _FORWARDING,
        "clearallforwardings": _FORWARDING,
        "exitonforwardfailure": _FORWARDING,
        "permitlocalcommand": _SESSION,
        "localcommand": _SESSION,
        "remotecommand": _SESSION,
        "requesttty": _SESSION,
        "sessiontype": _SESSION,
        "stdinnull": _SESSION,
        "forkafterauthentication": _SESSION,
        "escapechar": _SESSION,
        "hostname": "set the host field (or HostName in ssh_config_file)",
        "port": "set the port field",
        "user": "set the user field",
        "identityfile": "set private_key_file (or IdentityFile in ssh_config_file)",
        "include": "name the file as ssh_config_file",
        "host": "Host blocks belong in ssh_config_file",
        "match": "Match blocks belong in ssh_config_file",
    }
)

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*", re.ASCII)


def option_problems(options: Iterable[tuple[str, str]], field: str = "ssh_options") -> list[str]:
    """Messages for options that may not be set (empty when all may), each naming
    ``<field>.<Option>``."""
    problems: list[str] = []
    for name, value in options:
        where = f"{field}.{name}"
        if not _NAME.fullmatch(name):
            problems.append(f"{where} is not an OpenSSH option name (letters and digits)")
            continue
        reason = REFUSED_OPTIONS.get(name.lower())
        if reason is not None:
            problems.append(f"{where} is refused: {reason}")
            continue
        if value.strip() == "":
            problems.append(f"{where} must not be empty")
        elif any(ch in value for ch in "\r\n\0"):
            problems.append(f"{where} must be one line")
    return problems
