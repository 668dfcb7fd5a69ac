"""A source file the validation cache trusted but whose bytes changed, caught at write time, through
the installed ``distributor run`` onto a local root, an SFTP root served by OpenSSH and an S3
prefix on the moto server.

The cache is warmed by a run to another (local) destination; the file is then changed in place
(same size, modification time set back) and the cache entry forged to vouch for it, as bit rot
or a hand-edited cache would leave it. Validation trusts the entry, so the write is what catches
the change: the run fails naming the output path and the source file, not the staging temporary,
and the destination is left as it was (no temporary, no partial output, no state).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from distributor_core.validation_cache import cache_file, encode, settled
from tests.bundle.conftest import make_bundle
from tests.cli.conftest import run_script

BAD = "data/part-00.bin"
FILES = {
    BAD: bytes(range(256)) * 1024,
    "data/part-01.bin": bytes(reversed(range(256))) * 512,
    "readme.txt": b"two parts\n",
}


@dataclass
class Destination:
    yaml: str
    env: dict[str, str]
    #: every destination-relative name of a stored file (directories left out: object stores
    #: have none, and a failed local or SFTP publication may leave its empty parents)
    files: Callable[[], list[str]]


def _local_files(root: Path) -> Callable[[], list[str]]:
    return lambda: sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.sftp), pytest.param("s3", marks=pytest.mark.s3)])
def destination(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Destination]:
    if request.param == "local":
        root = tmp_path / "dst"
        yield Destination(f"backend: local, path: {root}", {}, _local_files(root))
        return
    if request.param == "ssh":
        server = request.getfixturevalue("sshd_server")
        root = server.make_sftp_root()
        yield Destination(
            f"backend: ssh, host: {server.host}, port: {server.port}, user: {server.user}, path: {root}, "
            f"private_key_file: {server.client_key_path}, known_hosts_file: {server.known_hosts_path}",
            {},
            _local_files(root),
        )
        return
    server = request.getfixturevalue("moto_server")
    bucket = server.create_bucket()
    prefix = f"site/{secrets.token_hex(4)}"
    client = server.client()

    def files() -> list[str]:
        listed = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/")
        return sorted(item["Key"][len(prefix) + 1 :] for item in listed.get("Contents", []))

    try:
        yield Destination(
            f"backend: s3, bucket: {bucket}, prefix: {prefix}, region: {server.region}, "
            f"endpoint: {server.endpoint_url}, force_path_style: true, "
            "credentials: {access_key_id_env: INTEGRITY_TEST_KEY, secret_access_key_env: INTEGRITY_TEST_SECRET}",
            {"INTEGRITY_TEST_KEY": server.access_key_id, "INTEGRITY_TEST_SECRET": server.secret_access_key},
            files,
        )
    finally:
        client.close()


def _identity(path: Path) -> tuple[int, int, int, int, int]:
    info = os.lstat(path)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _settle(path: Path) -> None:
    """Wait until ``path`` is older than the cache's safety margin (so an entry for it is trusted)."""
    deadline = time.monotonic() + 30
    while not settled(_identity(path), time.time_ns()):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _corrupt_behind_the_cache(root: Path, rel: str, cache_dir: Path) -> str:
    """Change ``root/rel`` in place (same size, mtime set back) and forge the validation cache to
    vouch that its bytes still hash to the manifest's sha256, which is returned."""
    target = root / rel
    good = hashlib.sha256(target.read_bytes()).hexdigest()
    before = os.lstat(target)
    with open(target, "r+b") as out:
        out.write(b"rot")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    _settle(target)
    cache = cache_file(str(root.parent), {"DISTRIBUTOR_CACHE_DIR": str(cache_dir)})
    assert cache is not None and cache.is_file()  # the warm-up run recorded the source
    entry = {f"{root.name}/{rel}": (*_identity(target), f"sha256:{good}")}
    cache.write_bytes(encode(str(root.parent), time.time_ns(), entry))
    return f"sha256:{good}"


def test_a_corrupted_trusted_source_file_fails_naming_the_output_and_source(
    tmp_path: Path, destination: Destination
) -> None:
    source = tmp_path / "spool"
    make_bundle(source / "b1", FILES, bundle_id="integrity.test")
    for rel in FILES:
        _settle(source / "b1" / rel)
    config = tmp_path / "distributor.yml"

    def run(target: str) -> tuple[int, str]:
        config.write_text(
            f"pipelines:\n  - id: reports\n    source: {{backend: local, path: {source}}}\n"
            f"    destinations: [{{id: archive, {target}}}]\n"
        )
        result = run_script(
            "run",
            "--config",
            str(config),
            cwd=tmp_path,
            env={"DISTRIBUTOR_CACHE_DIR": str(tmp_path / "cache"), **destination.env},
        )
        return result.returncode, result.stdout + result.stderr

    warm = run(f"backend: local, path: {tmp_path / 'warm'}")
    assert warm[0] == 0, warm[1]
    expected = _corrupt_behind_the_cache(source / "b1", BAD, tmp_path / "cache")

    code, output = run(destination.yaml)
    assert code == 1, output
    backend = destination.yaml.split(",")[0].removeprefix("backend: ")
    # the final destination-relative output path, the source file it was read from, the mismatch
    assert f"write {backend} b1/{BAD}: integrity: sha256 sha256:" in output
    assert f"does not match expected {expected} (read from source bundle b1 file {BAD})" in output
    assert ".distributor-tmp-" not in output
    # nothing published and nothing left behind: no temporary, no output, no state, lock or journal
    assert destination.files() == []
