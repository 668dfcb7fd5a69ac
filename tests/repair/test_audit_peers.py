"""``distributor audit``, ``reconcile-state --audit`` and ``reconcile-state --adopt`` through the
installed console script, on a local root, an SFTP root served by OpenSSH and an S3 prefix on the
moto server (issue 18 item 4). Outputs are published by ``distributor run`` and then damaged
behind distributor's back the way a person or another tool would: bytes changed in place (same
size), a truncation, a deletion; then restored by a hand copy, which is adopted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.bundle.conftest import make_bundle
from tests.cli.conftest import run_script

FILES = {
    "report.md": b"# Report\n\nSunny.\n",
    "data/a.csv": b"a,b\n1,2\n",
    "data/b.csv": b"c,d\n3,4\n5,6\n",
    "notes.txt": b"notes\n",
}
SELECT = ("--pipeline", "reports", "--destination", "archive", "--bundle", "daily")


@dataclass
class Peer:
    name: str
    config: Path
    env: dict[str, str]
    #: behind distributor's back: write, delete and read a destination-relative path
    put: Callable[[str, bytes], None]
    delete: Callable[[str], None]
    get: Callable[[str], bytes | None]
    client: Any = None
    bucket: str = ""
    prefix: str = ""

    def cli(self, *args: str) -> tuple[int, Any, str]:
        result = run_script(*args, "--config", str(self.config), "--format", "json", env=self.env)
        document = json.loads(result.stdout) if result.stdout else None
        return result.returncode, document, result.stderr

    def text(self, *args: str) -> tuple[int, str, str]:
        result = run_script(*args, "--config", str(self.config), env=self.env)
        return result.returncode, result.stdout, result.stderr


def _config(tmp_path: Path, destination: str) -> Path:
    source = tmp_path / "src"
    make_bundle(source / "daily", FILES)
    path = tmp_path / "distributor.yml"
    path.write_text(
        "pipelines:\n  - id: reports\n    source:\n      backend: local\n"
        f"      path: {source}\n    destinations:\n      - id: archive\n" + destination
    )
    return path


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.sftp), pytest.param("s3", marks=pytest.mark.s3)])
def peer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Peer]:
    if request.param in ("local", "ssh"):
        if request.param == "local":
            root = tmp_path / "dst"
            destination = f"        backend: local\n        path: {root}\n"
            adopt_file: Callable[[Path], None] | None = None
        else:
            server = request.getfixturevalue("sshd_server")
            root = server.make_sftp_root()
            destination = (
                f"        backend: ssh\n        host: {server.host}\n        port: {server.port}\n"
                f"        user: {server.user}\n        path: {root}\n"
                f"        private_key_file: {server.client_key_path}\n"
                f"        known_hosts_file: {server.known_hosts_path}\n"
            )
            adopt_file = server.chown_to_user

        def put(rel: str, data: bytes) -> None:
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if adopt_file is not None:
                adopt_file(root)  # the SFTP user must be able to replace it

        def get(rel: str) -> bytes | None:
            target = root / rel
            return target.read_bytes() if target.exists() else None

        yield Peer(request.param, _config(tmp_path, destination), {}, put, lambda rel: (root / rel).unlink(), get)
        return
    server = request.getfixturevalue("moto_server")
    bucket = server.create_bucket()
    prefix = f"site/{secrets.token_hex(4)}"
    destination = (
        f"        backend: s3\n        bucket: {bucket}\n        prefix: {prefix}\n        region: {server.region}\n"
        f"        endpoint: {server.endpoint_url}\n        force_path_style: true\n        credentials:\n"
        "          access_key_id_env: AUDIT_TEST_KEY\n          secret_access_key_env: AUDIT_TEST_SECRET\n"
    )
    env = {"AUDIT_TEST_KEY": server.access_key_id, "AUDIT_TEST_SECRET": server.secret_access_key}
    client = server.client()

    def s3_get(rel: str) -> bytes | None:
        try:
            return client.get_object(Bucket=bucket, Key=f"{prefix}/{rel}")["Body"].read()
        except client.exceptions.NoSuchKey:
            return None

    try:
        yield Peer(
            "s3",
            _config(tmp_path, destination),
            env,
            lambda rel, data: client.put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=data),
            lambda rel: client.delete_object(Bucket=bucket, Key=f"{prefix}/{rel}"),
            s3_get,
            client,
            bucket,
            prefix,
        )
    finally:
        client.close()


def _statuses(result: dict) -> dict[str, str]:
    return {output["path"]: output["status"] for output in result["outputs"]}


def test_audit_repair_and_adoption_of_a_hand_copy(peer: Peer) -> None:
    code, document, _ = peer.cli("run")
    assert code == 0 and document["result"]["actions"][0]["action"] == "publish_new"
    code, document, stderr = peer.cli("audit", *SELECT)
    assert (code, stderr) == (0, "")
    assert document["ok"] is True and document["result"]["status"] == "ok"
    assert set(_statuses(document["result"]).values()) == {"ok"}
    assert document["result"]["bytes_read"] == sum(len(data) for data in FILES.values())

    peer.put("daily/data/a.csv", b"a,b\n9,9\n")  # same size, other bytes
    peer.put("daily/data/b.csv", b"c,d\n")  # truncated
    peer.delete("daily/notes.txt")
    code, document, stderr = peer.cli("audit", *SELECT)
    assert code == 1
    result = document["result"]
    assert document["ok"] is False and document["error"].startswith(
        "audit found problems: reports/archive [daily]: 1 missing, 1 size_mismatch, 1 digest_mismatch (root "
    )
    assert document["error"].endswith("; more: distributor explain audit_problems)")
    assert result["refusal"]["count"] == 3
    assert stderr == f"distributor: {document['error']}\n"
    assert _statuses(result) == {
        "report.md": "ok", "data/a.csv": "digest_mismatch", "data/b.csv": "size_mismatch", "notes.txt": "missing"
    }
    corrupt = next(o for o in result["outputs"] if o["path"] == "data/a.csv")
    assert corrupt["actual_sha256"] == "sha256:" + hashlib.sha256(b"a,b\n9,9\n").hexdigest()
    assert corrupt["checked_by"] == "read"

    code, text, _ = peer.text("audit", *SELECT)
    assert code == 1
    assert text.splitlines()[0].endswith(
        "bundle=daily status=problems checked=4 ok=1 missing=1 not_a_file=0 size_mismatch=1 digest_mismatch=1 "
        "unmanaged=0 bytes_read=" + str(len(FILES["report.md"]) + 8)
    )
    assert [line.split(" status=")[0] for line in text.splitlines()[1:]] == [
        "Output: path=data/a.csv", "Output: path=data/b.csv", "Output: path=notes.txt"
    ]

    # reconcile-state --audit: a dry run first, then drop the three records (files stay)
    code, document, _ = peer.cli("reconcile-state", *SELECT, "--audit", "--dry-run")
    assert code == 0 and document["result"]["would_change"] is True
    code, document, _ = peer.cli("reconcile-state", *SELECT, "--audit")
    assert code == 0 and document["result"]["changed"] is True
    assert [m["path"] for m in document["result"]["missing_managed_outputs"]] == ["notes.txt"]
    assert [(m["path"], m["storage_status"]) for m in document["result"]["mismatched_managed_outputs"]] == [
        ("data/a.csv", "digest_mismatch"), ("data/b.csv", "size_mismatch")
    ]
    assert peer.get("daily/data/a.csv") == b"a,b\n9,9\n"
    code, document, _ = peer.cli("audit", *SELECT)
    assert code == 1 and ": 2 unmanaged (root " in document["error"]
    assert document["error"].endswith("; more: distributor explain audit_problems)")
    assert document["result"]["refusal"]["count"] == 2 and "--adopt" in document["result"]["refusal"]["remedy"]
    code, document, _ = peer.cli("audit", *SELECT, "--allow-unmanaged")
    assert code == 0 and _statuses(document["result"]) == {"report.md": "ok"}

    # hand copies with the right bytes are adopted: a dry run unless --apply
    for rel in ("data/a.csv", "data/b.csv", "notes.txt"):
        peer.put(f"daily/{rel}", FILES[rel])
    peer.put("daily/extra.txt", b"someone else's")
    code, document, _ = peer.cli("reconcile-state", *SELECT, "--adopt")
    result = document["result"]
    assert code == 0 and result["dry_run"] is True and result["would_change"] is True
    assert [o["path"] for o in result["adopted_outputs"]] == ["data/a.csv", "data/b.csv", "notes.txt"]
    code, document, _ = peer.cli("audit", *SELECT)
    assert code == 1  # the dry run changed nothing
    code, document, _ = peer.cli("reconcile-state", *SELECT, "--adopt", "--apply")
    result = document["result"]
    assert code == 0 and result["changed"] is True
    assert [(e["path"], e["reason"]) for e in result["unmanaged_entries"]] == [
        ("extra.txt", "not an output the source plans here")
    ]
    code, document, _ = peer.cli("audit", *SELECT, "--allow-unmanaged")
    assert code == 0 and set(_statuses(document["result"]).values()) == {"ok"}
    code, document, _ = peer.cli("run")
    assert code == 0 and document["result"]["actions"][0]["action"] == "skip_same"  # no rewrite


def test_adopting_a_whole_copy_made_by_another_tool(peer: Peer) -> None:
    for rel, data in FILES.items():
        peer.put(f"daily/{rel}", data)
    code, document, _ = peer.cli("run", "--dry-run")
    assert code == 1 and document["result"]["actions"][0]["action"] == "fail_unmanaged"
    code, document, _ = peer.cli("reconcile-state", *SELECT, "--adopt", "--apply")
    assert code == 0 and document["result"]["adoption"]["creates_state"] is True
    assert len(document["result"]["adopted_outputs"]) == len(FILES)
    code, document, _ = peer.cli("run")
    assert code == 0 and document["result"]["actions"][0]["action"] == "skip_same"
    code, document, _ = peer.cli("audit", "--all")
    assert code == 0 and document["result"]["destinations"][0]["bundles"][0]["status"] == "ok"


@pytest.mark.s3
def test_s3_uses_a_stored_whole_object_checksum(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue("moto_server")
    bucket = server.create_bucket()
    destination = (
        f"        backend: s3\n        bucket: {bucket}\n        prefix: p\n        region: {server.region}\n"
        f"        endpoint: {server.endpoint_url}\n        force_path_style: true\n        credentials:\n"
        "          access_key_id_env: AUDIT_TEST_KEY\n          secret_access_key_env: AUDIT_TEST_SECRET\n"
    )
    env = {"AUDIT_TEST_KEY": server.access_key_id, "AUDIT_TEST_SECRET": server.secret_access_key}
    config = _config(tmp_path, destination)
    assert run_script("run", "--config", str(config), env=env).returncode == 0
    client = server.client()
    try:
        # another tool rewrote two objects asking S3 to store their sha256: one still right, one not
        client.put_object(Bucket=bucket, Key="p/daily/report.md", Body=FILES["report.md"], ChecksumAlgorithm="SHA256")
        changed = b"a,b\n9,9\n"
        client.put_object(Bucket=bucket, Key="p/daily/data/a.csv", Body=changed, ChecksumAlgorithm="SHA256")
        stored = client.head_object(Bucket=bucket, Key="p/daily/data/a.csv", ChecksumMode="ENABLED")
        assert base64.b64decode(stored["ChecksumSHA256"]) == hashlib.sha256(changed).digest()
    finally:
        client.close()
    result = run_script("audit", "--config", str(config), *SELECT, "--format", "json", env=env)
    assert result.returncode == 1
    outputs = {o["path"]: o for o in json.loads(result.stdout)["result"]["outputs"]}
    assert (outputs["report.md"]["status"], outputs["report.md"]["checked_by"]) == ("ok", "stored_checksum")
    assert (outputs["data/a.csv"]["status"], outputs["data/a.csv"]["checked_by"]) == (
        "digest_mismatch", "stored_checksum"
    )
    assert outputs["data/a.csv"]["actual_sha256"] == "sha256:" + hashlib.sha256(changed).hexdigest()
    assert outputs["notes.txt"]["checked_by"] == "read"  # written by distributor: no stored checksum
    bytes_read = json.loads(result.stdout)["result"]["bytes_read"]
    assert bytes_read == len(FILES["data/b.csv"]) + len(FILES["notes.txt"])
