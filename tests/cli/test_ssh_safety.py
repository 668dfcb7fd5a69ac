"""``transport: openssh`` cannot be talked out of checking host keys (issue 35, item 4), through
``distributor run`` against the sshd peer with an empty ``known_hosts_file``: every one of these
published before. ``NoHostAuthenticationForLocalhost yes`` or a ``KnownHostsCommand`` in
``ssh_config_file`` no longer skips or feeds the check (the generated safety block pins them);
``ssh_options`` are an allow-list (``IdentityFile2``, ``PKCS11Provider``, ``Ciphers=+3des-cbc`` and
their like are refused at config load, naming the field), and so are hosts and users that are not
names (``;``, ``$()``, a leading ``-``, a line break), on both transports."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.bundle.conftest import make_bundle
from tests.cli.conftest import run_script
from tests.peers.sshd import SSHDServer

pytestmark = pytest.mark.sftp
WHERE = "pipelines[0].destinations"


def _config(tmp_path: Path, destinations: list[dict[str, Any]]) -> Path:
    source = tmp_path / "spool"
    if not source.exists():
        make_bundle(source / "daily-1", {"report.md": b"# report\n"})
    config = tmp_path / "distributor.yml"
    config.write_text(json.dumps({"pipelines": [{  # JSON is YAML
        "id": "reports", "source": {"backend": "local", "path": str(source)},
        "destinations": [{"id": f"sftp{n}", "backend": "ssh", **d} for n, d in enumerate(destinations)],
    }]}))
    return config


def _sftp(server: SSHDServer, root: Path, known_hosts: Path, **fields: Any) -> dict[str, Any]:
    return {"host": server.host, "port": server.port, "user": server.user, "path": str(root),
            "private_key_file": str(server.client_key_path), "known_hosts_file": str(known_hosts),
            "transport": "openssh", **fields}


@pytest.fixture
def empty_known_hosts(tmp_path: Path) -> Path:
    path = tmp_path / "known_hosts"
    path.write_text("")
    return path


@pytest.mark.parametrize("lines", [
    ["NoHostAuthenticationForLocalhost yes"],
    ["KnownHostsCommand /bin/cat {real}"],
    ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null", "CheckHostIP yes", "HostKeyAlias localhost"],
], ids=["no-host-authentication-for-localhost", "known-hosts-command", "strict-off-alias"])
def test_no_line_of_ssh_config_file_switches_host_key_checking_off(
    sshd_server: SSHDServer, tmp_path: Path, empty_known_hosts: Path, lines: list[str]
) -> None:
    ssh_config = tmp_path / "ssh_config"
    body = "".join(f"    {line.format(real=sshd_server.known_hosts_path)}\n" for line in lines)
    ssh_config.write_text(f"Host *\n{body}")
    root = sshd_server.make_sftp_root()
    config = _config(tmp_path, [_sftp(sshd_server, root, empty_known_hosts, ssh_config_file=str(ssh_config))])
    result = run_script("run", "--config", str(config))
    assert result.returncode == 1, result.stdout + result.stderr
    # (behind HostKeyAlias the name looked up is the alias's)
    assert f"is not in known_hosts file {empty_known_hosts} (server offered a ED25519 key)" in result.stderr, \
        result.stderr
    assert list(root.iterdir()) == [] and empty_known_hosts.read_text() == ""


def test_ssh_options_are_an_allow_list_and_weak_algorithms_are_refused(
    sshd_server: SSHDServer, tmp_path: Path, empty_known_hosts: Path
) -> None:
    options = {
        "NoHostAuthenticationForLocalhost": "yes",
        "IdentityFile2": "/etc/ssh/other_key",
        "PKCS11Provider": "/usr/lib/opensc-pkcs11.so",
        "Ciphers": "+3des-cbc",
        "KexAlgorithms": "diffie-hellman-group1-sha1,curve25519-sha256",
        "HostKeyAlgorithms": "ssh-rsa",
        "ServerAliveInterval": "0",
        "ConnectTimeout": "$(reboot)",
        "Compression": "yes",  # allowed
        "MACs": "-hmac-sha1",  # removing is always fine
    }
    root = sshd_server.make_sftp_root()
    config = _config(tmp_path, [_sftp(sshd_server, root, empty_known_hosts, ssh_options=options)])
    result = run_script("run", "--config", str(config))
    assert result.returncode == 1 and "distributor: invalid config: " in result.stderr, result.stderr
    field = f"{WHERE}[0].ssh_options"
    for message in (
        f"{field}.NoHostAuthenticationForLocalhost is refused: host keys are checked strictly against "
        "known_hosts_file (host_key_policy decides about unknown keys)",
        f"{field}.IdentityFile2 is refused: ssh_options takes only AddressFamily, BindAddress,",
        f"{field}.PKCS11Provider is refused: it makes ssh run or load a program; name it in ssh_config_file "
        "if you trust it",
        f"{field}.Ciphers is refused: 3des-cbc is a weak algorithm, which distributor never lets ssh use",
        f"{field}.KexAlgorithms is refused: diffie-hellman-group1-sha1 is a weak algorithm",
        f"{field}.HostKeyAlgorithms is refused: ssh-rsa is a weak algorithm",
        f"{field}.ServerAliveInterval must be a whole number from 1 to 600 (0 would switch keep-alives off)",
        f"{field}.ConnectTimeout must be a whole number from 1 to 600",
    ):
        assert message in result.stderr, f"{message!r} not in {result.stderr}"
    assert f"{field}.Compression" not in result.stderr and f"{field}.MACs" not in result.stderr
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("transport", ["paramiko", "openssh"])
def test_hosts_and_users_must_be_names(
    sshd_server: SSHDServer, tmp_path: Path, transport: str
) -> None:
    marker = tmp_path / "ran"
    root = sshd_server.make_sftp_root()
    bad = [
        {"host": f"127.0.0.1;touch {marker}"},
        {"host": f"$(touch {marker})"},
        {"host": f"-oProxyCommand=touch {marker}"},
        {"host": "127.0.0.1\nProxyCommand touch x"},
        {"user": f"me;touch {marker}"},
        {"user": "-oProxyCommand=x"},
        {"user": "me\nx"},
    ]
    destinations = [{**_sftp(sshd_server, root, sshd_server.known_hosts_path, transport=transport), **fields}
                    for fields in bad]
    result = run_script("run", "--config", str(_config(tmp_path, destinations)))
    assert result.returncode == 1 and "distributor: invalid config: " in result.stderr, result.stderr
    for index, fields in enumerate(bad):
        (name,) = fields
        rule = ("must be a host name, an IP address or a Host alias of ssh_config_file" if name == "host"
                else "must be a login name")
        assert f"{WHERE}[{index}].{name} {rule}" in result.stderr, result.stderr
    assert not marker.exists() and list(root.iterdir()) == []
    assert os.path.exists(sshd_server.known_hosts_path)
