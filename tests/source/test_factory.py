"""open_source_storage / open_destination_storage open the adapter the backend config's type names."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from distributor_core.config import HTTPUploadSource, LocalBackend, S3Backend, S3Credentials, SSHBackend
from distributor_core.storage.factory import (
    UnsupportedBackendError,
    open_destination_storage,
    open_source_storage,
)
from distributor_core.storage.local import LocalStorage


class Env:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def lookup(self, name: str) -> str | None:
        return self.values.get(name)


def test_local_source_and_destination(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"a")
    cfg = LocalBackend(path=str(tmp_path), resolved_path=tmp_path)
    source = open_source_storage(cfg, Env({}))
    assert isinstance(source, LocalStorage)
    assert source.read_bytes("a.txt") == b"a"
    assert source.root_display == str(tmp_path)
    out = LocalBackend(path="out", resolved_path=tmp_path / "out")
    dest = open_destination_storage(out, Env({}), dry_run=True)
    assert isinstance(dest, LocalStorage)
    assert dest.root_display == "out"
    assert not (tmp_path / "out").exists()


def test_http_upload_has_no_storage(tmp_path: Path) -> None:
    upload = HTTPUploadSource(staging_path=tmp_path, max_upload_size=1)
    with pytest.raises(UnsupportedBackendError, match=r"^source backend http_upload has no storage to open$"):
        open_source_storage(upload, Env({}))
    with pytest.raises(UnsupportedBackendError, match=r"^destination backend http_upload has no storage to open$"):
        open_destination_storage(upload, Env({}))


def test_ssh_dispatches_lazily_to_sftp_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, Any, bool]] = []

    class FakeSFTPStorage:
        @classmethod
        def from_config(cls, cfg: Any, env: Any, *, dry_run: bool = False) -> str:
            calls.append((cfg, env, dry_run))
            return "sftp-storage"

    module = types.ModuleType("distributor_core.storage.sftp")
    module.SFTPStorage = FakeSFTPStorage  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "distributor_core.storage.sftp", module)
    cfg = SSHBackend(host="h", user="u", path="/srv")
    env = Env({})
    assert open_destination_storage(cfg, env, dry_run=True) == "sftp-storage"
    assert open_source_storage(cfg, env) == "sftp-storage"
    assert calls == [(cfg, env, True), (cfg, env, False)]


@pytest.mark.s3
def test_s3_opens_through_from_config(moto_server: Any) -> None:
    bucket = moto_server.create_bucket()
    cfg = S3Backend(
        bucket=bucket,
        prefix="reports",
        region=moto_server.region,
        endpoint=moto_server.endpoint_url,
        force_path_style=True,
        credentials=S3Credentials(access_key_id_env="KEY_ID", secret_access_key_env="SECRET"),
    )
    env = Env({"KEY_ID": moto_server.access_key_id, "SECRET": moto_server.secret_access_key})
    storage = open_destination_storage(cfg, env)
    try:
        assert storage.backend == "s3"
        storage.write_bytes("x.txt", b"x", overwrite=False)
        client = moto_server.client()
        assert client.get_object(Bucket=bucket, Key="reports/x.txt")["Body"].read() == b"x"
        client.close()
    finally:
        storage.close()


def test_real_config_models(tmp_path: Path) -> None:
    from distributor_core.config import Environment, load_config

    (tmp_path / "spool").mkdir()
    (tmp_path / "spool" / "a.txt").write_bytes(b"a")
    config_path = tmp_path / "distributor.yml"
    config_path.write_text(
        "pipelines:\n"
        "  - id: reports\n"
        "    source: {backend: local, path: spool}\n"
        "    destinations:\n"
        "      - {id: archive, backend: local, path: published}\n"
    )
    config = load_config(config_path)
    env = Environment.from_config(config, {})
    pipeline = config.pipeline("reports")
    source = open_source_storage(pipeline.source, env)
    assert isinstance(source, LocalStorage)
    assert source.read_bytes("a.txt") == b"a"
    assert source.root_display == "spool"
    dest = open_destination_storage(pipeline.destination("archive"), env)
    assert isinstance(dest, LocalStorage)
    assert dest.root == tmp_path / "published"
    assert dest.root_display == "published"
    dest.write_bytes("daily/x.txt", b"x", overwrite=False)
    assert (tmp_path / "published" / "daily" / "x.txt").read_bytes() == b"x"
