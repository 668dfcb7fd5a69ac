"""The paramiko internals the pipelined SFTP transfer relies on (storage/sftp_wire.py).

These fail loudly, naming the private API, when the installed paramiko lacks one of them or is a
release outside the range pyproject.toml pins (the next major release in particular): re-check
sftp_wire.py against that release before widening the bound.
"""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

import paramiko
import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from paramiko.sftp_client import SFTPClient

from distributor_core.storage import sftp_wire as wire
from tests.peers.sshd import SSHDServer, make_sftp_storage

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _pinned() -> Requirement:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    found = [Requirement(d) for d in dependencies if Requirement(d).name == "paramiko"]
    assert len(found) == 1, "pyproject.toml must list paramiko once"
    return found[0]


def test_pyproject_pins_the_range_sftp_wire_supports() -> None:
    pinned = _pinned().specifier
    assert pinned == type(pinned)(wire.PARAMIKO_SUPPORTED), (
        f"pyproject.toml pins paramiko{pinned}, storage/sftp_wire.py supports {wire.PARAMIKO_SUPPORTED}"
    )
    assert f"{wire.PARAMIKO_NEXT_MAJOR}.0" not in pinned, "the next major release must stay excluded"


def test_installed_paramiko_is_in_the_supported_range() -> None:
    installed = Version(paramiko.__version__)
    assert installed in _pinned().specifier, (
        f"paramiko {installed} is installed but storage/sftp_wire.py supports {wire.PARAMIKO_SUPPORTED}: "
        f"re-check its private API ({', '.join(_names())}) against this release"
    )


def _names() -> list[str]:
    return [f"{owner.__name__}.{name}" for owner, name, _ in wire.PARAMIKO_PRIVATE_API] + [wire.PARAMIKO_CALLBACK]


@pytest.mark.parametrize(("owner", "name", "parameters"), wire.PARAMIKO_PRIVATE_API, ids=lambda v: str(v))
def test_private_api_exists_with_the_expected_signature(owner: type, name: str, parameters: tuple[str, ...]) -> None:
    member = getattr(owner, name, None)
    assert callable(member), f"paramiko {paramiko.__version__} has no {owner.__name__}.{name}"
    found = tuple(inspect.signature(member).parameters)
    assert found == parameters, f"paramiko {owner.__name__}.{name}{found} changed (expected {parameters})"


def test_read_response_hands_other_replies_to_the_owners_callback() -> None:
    """``_read_response`` must pass a reply to ``owner._async_response(kind, msg, num)`` and keep
    owners in a weak mapping (``Pending`` has ``__weakref__`` for it)."""
    source = inspect.getsource(SFTPClient._read_response)
    assert f"{wire.PARAMIKO_CALLBACK}(t, msg, num)" in source, "paramiko no longer calls fileobj._async_response"
    init = inspect.getsource(SFTPClient.__init__)
    assert "_expecting = weakref.WeakValueDictionary()" in init, "paramiko no longer keeps request owners weakly"


def test_check_paramiko_reports_nothing_for_the_installed_release() -> None:
    assert wire.check_paramiko() == []


def test_check_paramiko_names_a_missing_private_method(monkeypatch: pytest.MonkeyPatch) -> None:
    wire._paramiko_problems.cache_clear()
    monkeypatch.delattr(SFTPClient, "_async_request")
    try:
        problems = wire.check_paramiko()
    finally:
        wire._paramiko_problems.cache_clear()
    assert problems == [
        f"paramiko SFTPClient._async_request is missing (paramiko {paramiko.__version__}); "
        "the pipelined SFTP transfer needs it"
    ]


@pytest.mark.parametrize(("version", "ok"), [("3.4.0", True), ("5.1.0", True), ("3.3.1", False), ("6.0.0", False)])
def test_check_paramiko_refuses_releases_outside_the_range(
    monkeypatch: pytest.MonkeyPatch, version: str, ok: bool
) -> None:
    wire._paramiko_problems.cache_clear()
    monkeypatch.setattr(paramiko, "__version__", version)
    try:
        problems = wire.check_paramiko()
    finally:
        wire._paramiko_problems.cache_clear()
    if ok:
        assert problems == []
    else:
        assert problems == [
            f"paramiko {version} is outside the supported range {wire.PARAMIKO_SUPPORTED}: check the private "
            "API of distributor_core/storage/sftp_wire.py against it before widening the bound"
        ]


@pytest.mark.sftp
def test_an_unsupported_paramiko_refuses_the_channel_with_the_reason(
    sshd_server: SSHDServer, sftp_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distributor_core.storage.errors import ErrorKind, StorageError

    wire._paramiko_problems.cache_clear()
    monkeypatch.setattr(paramiko, "__version__", "6.0.0")
    storage = make_sftp_storage(sshd_server, sftp_root)
    try:
        with pytest.raises(StorageError) as info:
            storage.stat("")
    finally:
        storage.close()
        wire._paramiko_problems.cache_clear()
    assert info.value.kind == ErrorKind.UNAVAILABLE
    assert "paramiko 6.0.0 is outside the supported range >=3.4,<6" in str(info.value)


def test_async_request_keeps_the_state_write_requests_are_framed_with() -> None:
    """``sftp_wire._send_write`` numbers its requests as ``_async_request`` does: under
    ``_lock``, the owner stored in ``_expecting[num]``, ``request_number`` incremented."""
    source = inspect.getsource(SFTPClient._async_request)
    for line in ("self._lock.acquire()", "self._expecting[num] = fileobj", "self.request_number += 1"):
        assert line in source, f"paramiko SFTPClient._async_request no longer does {line}"
    assert set(wire.PARAMIKO_CLIENT_STATE) == {"_lock", "request_number", "_expecting"}


@pytest.mark.sftp
def test_a_client_without_the_request_state_refuses_the_channel_with_the_reason(
    sshd_server: SSHDServer, sftp_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distributor_core.storage.errors import ErrorKind, StorageError

    original = SFTPClient.__init__

    def without_counter(self: SFTPClient, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)
        del self.request_number

    monkeypatch.setattr(SFTPClient, "__init__", without_counter)
    storage = make_sftp_storage(sshd_server, sftp_root)
    try:
        with pytest.raises(StorageError) as info:
            storage.stat("")
    finally:
        storage.close()
    assert info.value.kind == ErrorKind.UNAVAILABLE
    assert f"paramiko {paramiko.__version__} has no SFTPClient.request_number" in str(info.value)
