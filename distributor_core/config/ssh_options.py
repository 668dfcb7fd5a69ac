"""What an ``ssh`` backend with ``transport: openssh`` may ask of the ``ssh`` client, and the
host and user names any ``ssh`` backend may name (issue 35, item 4).

``ssh_options`` become ``-o Option=value`` arguments of the ``ssh`` client. They are allowed by
an allow-list (:data:`ALLOWED`), each option with a check of its value: algorithms only by names
that are not weak (:data:`WEAK`), timeouts and counts as bounded whole numbers, the rest as one
word or one line. An option off the list is refused; one that would weaken host-key checking, let
``ssh`` prompt, open forwardings or change what the session runs says why, naming the option and
the field that sets the same thing safely (:data:`REFUSED_OPTIONS`). Anything else belongs in
``ssh_config_file``, whose host-key, algorithm and timeout settings the generated safety block
pins (:mod:`distributor_core.storage.sftp_openssh`).

Host and user names are checked as names (:func:`host_problem`, :func:`user_problem`, by the
pattern and length ``SSHBackend.host`` and ``user`` declare in :mod:`.models`): no shell
metacharacters, no leading ``-`` (which ``ssh`` would read as an option), no whitespace or line
breaks, whichever transport carries them. The storage transport checks the same rules again, so a
storage object built without a config file is held to them too. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from types import MappingProxyType

from distributor_core.config.models import SSHBackend
from distributor_core.config.shape import field

_HOST_KEYS = "host keys are checked strictly against known_hosts_file (host_key_policy decides about unknown keys)"
_FORWARDING = "distributor opens no forwardings over its SFTP connections"
_SESSION = "the session must run the sftp subsystem and nothing else"
_PROGRAM = "it makes ssh run or load a program; name it in ssh_config_file if you trust it"

#: lower-case option name -> why it is refused (with the field that sets it safely, if any)
REFUSED_OPTIONS: Mapping[str, str] = MappingProxyType(
    {
        "stricthostkeychecking": _HOST_KEYS,
        "userknownhostsfile": _HOST_KEYS,
        "globalknownhostsfile": _HOST_KEYS,
        "knownhostscommand": _HOST_KEYS,
        "verifyhostkeydns": _HOST_KEYS,
        "nohostauthenticationforlocalhost": _HOST_KEYS,
        "checkhostip": _HOST_KEYS,
        "hostkeyalias": _HOST_KEYS,
        "revokedhostkeys": _HOST_KEYS,
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
        "proxycommand": _PROGRAM,
        "pkcs11provider": _PROGRAM,
        "securitykeyprovider": _PROGRAM,
        "hostname": "set the host field (or HostName in ssh_config_file)",
        "port": "set the port field",
        "user": "set the user field",
        "identityfile": "set private_key_file (or IdentityFile in ssh_config_file)",
        "include": "name the file as ssh_config_file",
        "host": "Host blocks belong in ssh_config_file",
        "match": "Match blocks belong in ssh_config_file",
    }
)

#: algorithm option (lower case) -> patterns of the names refused in it: broken or
#: deprecated algorithms OpenSSH itself no longer offers by default
WEAK: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "ciphers": ("*-cbc", "3des*", "arcfour*", "blowfish*", "cast128*", "none"),
        "macs": ("*md5*", "*-96*", "umac-64*", "hmac-ripemd160*", "none"),
        "kexalgorithms": ("*sha1", "*-sha1-*", "*group1-*", "*group1", "none"),
        "hostkeyalgorithms": ("ssh-rsa", "ssh-rsa-cert-v01@openssh.com", "ssh-dss*", "none"),
        "pubkeyacceptedalgorithms": ("ssh-rsa", "ssh-rsa-cert-v01@openssh.com", "ssh-dss*", "none"),
        "pubkeyacceptedkeytypes": ("ssh-rsa", "ssh-rsa-cert-v01@openssh.com", "ssh-dss*", "none"),
        "casignaturealgorithms": ("ssh-rsa", "ssh-dss*", "none"),
    }
)

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*", re.ASCII)
_ALGORITHM = re.compile(r"[A-Za-z0-9@._+-]+", re.ASCII)
_WORD = re.compile(r"[A-Za-z0-9@%._:/+=,~-]+", re.ASCII)
HOST_RULE = "a host name, an IP address or a Host alias of ssh_config_file (letters, digits, '.', '-', '_', ':')"
USER_RULE = "a login name (letters, digits, '.', '-', '_', '@'; not starting with '-' or '.')"


def _declared(name: str) -> Callable[[str], bool]:
    """Whether a value fits the pattern and length ``SSHBackend.<name>`` declares (:mod:`.models`)."""
    key = field(SSHBackend, name)
    assert key.pattern is not None and key.max_length is not None
    pattern, longest = re.compile(key.pattern, re.ASCII), key.max_length
    return lambda value: pattern.fullmatch(value) is not None and len(value) <= longest


_HOST, _USER = _declared("host"), _declared("user")


def host_problem(value: str) -> str | None:
    """Why ``value`` cannot be an ssh ``host`` (``must be ...``), or ``None``."""
    return None if _HOST(value) else f"must be {HOST_RULE}"


def user_problem(value: str) -> str | None:
    """Why ``value`` cannot be an ssh ``user``, or ``None``."""
    return None if _USER(value) else f"must be {USER_RULE}"


def _algorithms(option: str) -> Callable[[str], str | None]:
    weak = WEAK[option]

    def check(value: str) -> str | None:
        removing = value.startswith("-")
        names = value[1:] if value[:1] in "^+-" else value
        for name in names.split(","):
            if not name or not _ALGORITHM.fullmatch(name) or (not removing and any(c in name for c in "*?!")):
                return f"must be a comma-separated list of algorithm names (optionally after ^, + or -), not {value!r}"
            if not removing and any(fnmatchcase(name.lower(), pattern) for pattern in weak):
                return f"is refused: {name} is a weak algorithm, which distributor never lets ssh use"
        return None

    return check


def _seconds(low: int, high: int, note: str = "") -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        if value.isascii() and value.isdigit() and low <= int(value) <= high:
            return None
        return f"must be a whole number from {low} to {high}{note}"

    return check


def _choice(*choices: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        return None if value.lower() in choices else f"must be {', '.join(choices[:-1])} or {choices[-1]}"

    return check


def _word(value: str) -> str | None:
    if _WORD.fullmatch(value) and not value.startswith("-"):
        return None
    return "must be one word (letters, digits and @ % . _ : / + = , ~ -, not starting with -)"


def _jumps(value: str) -> str | None:
    if value.lower() == "none":
        return None
    for hop in value.split(","):
        user, _, host = hop.rpartition("@")
        host, _, port = host.partition(":") if host.count(":") == 1 else (host, "", "")
        if (user and user_problem(user)) or host_problem(host) or (port and not (port.isdigit() and port.isascii())):
            return f"must be none or [user@]host[:port] hops separated by commas ({HOST_RULE})"
    return None


_YES_NO = _choice("yes", "no")

#: lower-case option name -> (its spelling, the check of its value)
ALLOWED: Mapping[str, tuple[str, Callable[[str], str | None]]] = MappingProxyType(
    {
        "ciphers": ("Ciphers", _algorithms("ciphers")),
        "macs": ("MACs", _algorithms("macs")),
        "kexalgorithms": ("KexAlgorithms", _algorithms("kexalgorithms")),
        "hostkeyalgorithms": ("HostKeyAlgorithms", _algorithms("hostkeyalgorithms")),
        "pubkeyacceptedalgorithms": ("PubkeyAcceptedAlgorithms", _algorithms("pubkeyacceptedalgorithms")),
        "pubkeyacceptedkeytypes": ("PubkeyAcceptedKeyTypes", _algorithms("pubkeyacceptedkeytypes")),
        "casignaturealgorithms": ("CASignatureAlgorithms", _algorithms("casignaturealgorithms")),
        "connecttimeout": ("ConnectTimeout", _seconds(1, 600)),
        "serveraliveinterval": ("ServerAliveInterval", _seconds(1, 600, " (0 would switch keep-alives off)")),
        "serveralivecountmax": ("ServerAliveCountMax", _seconds(1, 100)),
        "connectionattempts": ("ConnectionAttempts", _seconds(1, 10)),
        "compression": ("Compression", _YES_NO),
        "tcpkeepalive": ("TCPKeepAlive", _YES_NO),
        "identitiesonly": ("IdentitiesOnly", _YES_NO),
        "pubkeyauthentication": ("PubkeyAuthentication", _YES_NO),
        "gssapiauthentication": ("GSSAPIAuthentication", _YES_NO),
        "addressfamily": ("AddressFamily", _choice("any", "inet", "inet6")),
        "controlmaster": ("ControlMaster", _choice("no", "yes", "auto")),
        "loglevel": ("LogLevel", _choice("quiet", "fatal", "error", "info", "verbose", "debug", "debug1", "debug2",
                                         "debug3")),
        "controlpath": ("ControlPath", _word),
        "controlpersist": ("ControlPersist", _word),
        "certificatefile": ("CertificateFile", _word),
        "identityagent": ("IdentityAgent", _word),
        "bindaddress": ("BindAddress", _word),
        "bindinterface": ("BindInterface", _word),
        "preferredauthentications": ("PreferredAuthentications", _word),
        "rekeylimit": ("RekeyLimit", lambda v: None if re.fullmatch(r"[0-9]+[KMG]?( [0-9]+[smhdw]?)?|default( none)?",
                                                                   v, re.ASCII | re.IGNORECASE)
                       else "must be a size and an optional time, as ssh_config(5) says"),
        "ipqos": ("IPQoS", lambda v: None if re.fullmatch(r"[A-Za-z0-9]+( [A-Za-z0-9]+)?", v, re.ASCII)
                  else "must be one or two DSCP names or numbers"),
        "proxyjump": ("ProxyJump", _jumps),
    }
)
#: the allowed options as they are spelled (for messages and docs)
ALLOWED_NAMES = tuple(sorted(spelled for spelled, _ in ALLOWED.values()))


def option_problems(options: Iterable[tuple[str, str]], field: str = "ssh_options") -> list[str]:
    """Messages for options that may not be set as given (empty when all may), each naming
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
        allowed = ALLOWED.get(name.lower())
        if allowed is None:
            problems.append(f"{where} is refused: ssh_options takes only {', '.join(ALLOWED_NAMES)}; "
                            "put other options in ssh_config_file")
            continue
        if value.strip() == "":
            problems.append(f"{where} must not be empty")
        elif any(ch in value for ch in "\r\n\0"):
            problems.append(f"{where} must be one line")
        elif (problem := allowed[1](value.strip())) is not None:
            problems.append(f"{where} {problem}")
    return problems
