"""Repair and prune against the real peers a user meets: S3 (moto server) and SFTP (OpenSSH),
configured through YAML exactly as an operator would (interfaces §5, resolutions A1, A3, B2)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from distributor_core import paths as lp
from distributor_core.app.bundle_set import BundleSetReport
from distributor_core.app.prune import PruneError, prune
from distributor_core.app.reconcile import reconcile_state
from distributor_core.config import Config, Environment, load_config
from distributor_core.state import marshal_state, parse_state_document
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.factory import open_destination_storage
from distributor_core.storage.faults import FaultInjectingStorage
from tests.lockholder import held_lock
from tests.repair.conftest import NOW, PAST, ago, single_owner_state

PRUNE_BLOCK = "        retention:\n          prune:\n            enabled: true\n            keep_latest: 0\n"


@dataclass
class Remote:
    config: Config
    environment: Environment
    storage: Storage

    def put(self, path: str, data: bytes = b"managed\n") -> None:
        self.storage.write_bytes(path, data, overwrite=True)

    def put_state(self, doc, bundle: str = "", *, with_outputs: bool = True) -> bytes:
        data = marshal_state(doc)
        self.put(lp.state_path(bundle), data)
        if with_outputs:
            for output in doc.outputs:
                self.put(lp.join(bundle, output.path))
        return data

    def paths(self, bundle: str = "") -> list[str]:
        doc = parse_state_document(self.storage.read_bytes(lp.state_path(bundle)))
        return [output.path for output in doc.outputs]

    def files(self) -> list[str]:
        return [e.path for e in self.storage.walk("", include_reserved=True, include_dirs=False)]

    def open(self) -> Storage:
        return open_destination_storage(self.config.destination("reports", "archive"), self.environment)


def _config(tmp_path: Path, destination_yaml: str) -> Config:
    source = tmp_path / "source"
    source.mkdir(exist_ok=True)
    text = (
        "pipelines:\n"
        "  - id: reports\n"
        "    source:\n"
        "      backend: local\n"
        f"      path: {source}\n"
        "    destinations:\n"
        "      - id: archive\n" + destination_yaml + PRUNE_BLOCK
    )
    path = tmp_path / "distributor.yml"
    path.write_text(text)
    return load_config(path)


@pytest.fixture(params=[pytest.param("s3", marks=pytest.mark.s3), pytest.param("ssh", marks=pytest.mark.sftp)])
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Remote]:
    if request.param == "s3":
        server = request.getfixturevalue("moto_server")
        bucket = server.create_bucket()
        prefix = f"sites/{secrets.token_hex(4)}"
        config = _config(
            tmp_path,
            "        backend: s3\n"
            f"        bucket: {bucket}\n"
            f"        prefix: {prefix}\n"
            f"        region: {server.region}\n"
            f"        endpoint: {server.endpoint_url}\n"
            "        force_path_style: true\n"
            "        credentials:\n"
            "          access_key_id_env: REPAIR_TEST_KEY\n"
            "          secret_access_key_env: REPAIR_TEST_SECRET\n",
        )
        env = Environment({"REPAIR_TEST_KEY": server.access_key_id, "REPAIR_TEST_SECRET": server.secret_access_key})
    else:
        server = request.getfixturevalue("sshd_server")
        root = server.make_sftp_root()
        config = _config(
            tmp_path,
            "        backend: ssh\n"
            f"        host: {server.host}\n"
            f"        port: {server.port}\n"
            f"        user: {server.user}\n"
            f"        path: {root}\n"
            f"        private_key_file: {server.client_key_path}\n"
            f"        known_hosts_file: {server.known_hosts_path}\n",
        )
        env = Environment({})
    remote = Remote(config, env, None)  # type: ignore[arg-type]
    remote.storage = remote.open()
    try:
        yield remote
    finally:
        remote.storage.close()


def test_reconcile_apply(remote: Remote) -> None:
    remote.put_state(single_owner_state({"report.md": PAST, "summary.txt": PAST}), with_outputs=False)
    remote.put("report.md")
    remote.put("extra.txt", b"unmanaged")
    report = reconcile_state(
        remote.config, pipeline_id="reports", destination_id="archive", now=NOW, environment=remote.environment
    )
    assert report.changed
    assert [m.path for m in report.missing_managed_outputs] == ["summary.txt"]
    assert [e.path for e in report.unmanaged_entries] == ["extra.txt"]
    assert report.backend == remote.config.destination("reports", "archive").backend
    assert remote.paths() == ["report.md"]
    assert remote.files() == [".distributor.json", "extra.txt", "report.md"]


def test_prune_partial_failure_then_retry(remote: Remote) -> None:
    remote.put_state(single_owner_state({"a/old.txt": ago(72), "b/fresh.txt": ago(24)}))
    remote.put("unmanaged.txt", b"keep")
    faulty = FaultInjectingStorage(remote.open())
    faulty.fail("delete", path="b/fresh.txt")
    with pytest.raises(PruneError) as info:
        prune(remote.config, pipeline_id="reports", destination_id="archive", dry_run=False, now=NOW,
              environment=remote.environment, storage=faulty)
    faulty.close()
    report = info.value.report
    assert [c.path for c in report.deleted_outputs] == ["a/old.txt"]
    assert report.failed_output.path == "b/fresh.txt"
    assert remote.paths() == ["b/fresh.txt"]
    assert remote.files() == [".distributor.json", "b/fresh.txt", "unmanaged.txt"]
    retry = prune(remote.config, pipeline_id="reports", destination_id="archive", dry_run=False, now=NOW,
                  environment=remote.environment)
    assert [c.path for c in retry.deleted_outputs] == ["b/fresh.txt"]
    assert remote.paths() == []
    assert remote.files() == [".distributor.json", "unmanaged.txt"]


def test_all_bundles(remote: Remote) -> None:
    for bundle in ("x", "y/z"):
        remote.put_state(single_owner_state({"old.txt": ago(72)}), bundle=bundle)
    report = prune(remote.config, pipeline_id="reports", destination_id="archive", dry_run=True, now=NOW,
                   environment=remote.environment, all_bundles=True)
    assert isinstance(report, BundleSetReport)
    assert [r.bundle_path for r in report.reports] == ["x", "y/z"]
    assert all(r.would_change for r in report.reports)


def test_held_lock_is_a_conflict(remote: Remote) -> None:
    data = remote.put_state(single_owner_state({"old.txt": ago(72)}))
    with held_lock(remote.storage, clock=lambda: PAST), pytest.raises(StorageError) as info:
        prune(remote.config, pipeline_id="reports", destination_id="archive", dry_run=False, now=NOW,
              environment=remote.environment, lock_wait=0.3)
    assert info.value.kind == ErrorKind.CONFLICT
    assert "is locked by another writer since 2020-01-01T00:00:00Z" in str(info.value)
    assert remote.storage.read_bytes(".distributor.json") == data
