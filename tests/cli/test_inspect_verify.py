"""``inspect`` never vouches for bad bytes (issue 15 item 5), through the real console script.

Each listed file is checked as ``validate`` checks it; the report shows the actual size and
sha256 next to the recorded ones, and an invalid bundle exits 1 with validate's message.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.bundle.conftest import REPORT, SUMMARY, make_bundle
from tests.cli.conftest import run_script, write_config
from tests.peers.moto import MotoServer
from tests.peers.sshd import SSHDServer


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _file_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("File: ")]


def test_same_size_change_is_caught_in_text(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    make_bundle(bundle)
    tampered = b"Summary!"  # same size as b"Summary\n": only the digest tells
    (bundle / "summary.txt").write_bytes(tampered)
    result = run_script("inspect", str(bundle))
    assert result.returncode == 1
    error = f"file summary.txt sha256 {_sha(tampered)} does not match manifest sha256 {_sha(SUMMARY)}"
    assert result.stderr == f"distributor: invalid bundle {bundle}: {error}\n"
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Bundle: path={bundle} id=reports.daily ") and lines[0].endswith(" valid=false")
    assert _file_lines(result.stdout) == [
        f"File: path=report.md size=16 sha256={_sha(REPORT)} actual_size=16 actual_sha256={_sha(REPORT)} ok=true",
        f"File: path=summary.txt size=8 sha256={_sha(SUMMARY)} actual_size=8 actual_sha256={_sha(tampered)} "
        f'ok=false error="{error}"',
    ]
    # the verdict is validate's, word for word
    validated = run_script("validate", str(bundle))
    assert (validated.returncode, validated.stderr) == (1, result.stderr)


def test_size_change_missing_and_symlinked_files_in_json(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    make_bundle(bundle, {"report.md": REPORT, "summary.txt": SUMMARY, "gone.txt": b"x", "link.txt": b"y"})
    grown = SUMMARY + b"more\n"
    (bundle / "summary.txt").write_bytes(grown)
    (bundle / "gone.txt").unlink()
    (bundle / "link.txt").unlink()
    os.symlink(bundle / "report.md", bundle / "link.txt")
    result = run_script("inspect", "-format=json", str(bundle))
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    first_error = "file summary.txt size 13 does not match manifest size 8"
    assert (doc["ok"], doc["error"]) == (False, f"1 invalid bundle: {bundle}: {first_error}")
    entry = doc["result"]["bundles"][0]
    assert (entry["valid"], entry["error"]) == (False, first_error)
    assert doc["result"]["invalid"] == [{"path": str(bundle), "error": first_error}]
    files = {item["path"]: item for item in entry["files"]}
    assert files["report.md"]["ok"] is True
    assert files["summary.txt"] == {
        "path": "summary.txt", "size": 8, "sha256": _sha(SUMMARY),
        "actual_size": 13, "actual_sha256": _sha(grown), "ok": False, "error": first_error,
    }
    assert files["gone.txt"] == {
        "path": "gone.txt", "size": 1, "sha256": _sha(b"x"), "ok": False, "error": "file gone.txt does not exist",
    }
    assert files["link.txt"]["ok"] is False and "actual_size" not in files["link.txt"]
    assert files["link.txt"]["error"] == "file link.txt is not a regular file (symlink)"
    assert result.stderr == f"distributor: invalid bundle {bundle}: {first_error}\n"


def test_valid_bundle_reports_measured_digests_of_large_files(tmp_path: Path) -> None:
    big = os.urandom(9 * 1024 * 1024 + 7)  # several storage chunks
    make_bundle(tmp_path / "b", {"big.bin": big, "report.md": REPORT})
    result = run_script("inspect", "--format", "json", str(tmp_path / "b"))
    assert (result.returncode, result.stderr) == (0, "")
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and "invalid" in doc["result"] and doc["result"]["invalid"] == []
    big_entry = doc["result"]["bundles"][0]["files"][0]
    assert (big_entry["actual_size"], big_entry["actual_sha256"], big_entry["ok"]) == (len(big), _sha(big), True)


def test_tree_and_config_selection_report_every_bundle(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    make_bundle(spool / "good")
    make_bundle(spool / "bad")
    (spool / "bad" / "report.md").write_bytes(b"# Report\nRainy.\n")
    tree = run_script("inspect", str(spool))
    assert tree.returncode == 1
    bundles = [line for line in tree.stdout.splitlines() if line.startswith("Bundle: ")]
    assert [line.split()[1] for line in bundles] == [f"path={spool}/bad", f"path={spool}/good"]
    assert [line.rsplit(" ", 1)[1] for line in bundles] == ["valid=false", "valid=true"]
    assert tree.stderr.startswith(f"distributor: invalid bundle {spool}/bad: file report.md sha256 ")
    config = write_config(tmp_path)
    one = run_script("inspect", "-config", str(config), "-pipeline", "reports", "-bundle=bad")
    assert one.returncode == 1
    assert one.stderr.startswith("distributor: invalid bundle bad: file report.md sha256 ")
    good = run_script("inspect", "--config", str(config), "--pipeline", "reports", "--bundle", "good")
    assert (good.returncode, good.stderr) == (0, "")
    assert good.stdout.splitlines()[0].endswith(" valid=true")


@pytest.mark.s3
def test_inspect_config_over_s3_reports_actual_bytes(moto_server: MotoServer, tmp_path: Path) -> None:
    bucket = moto_server.create_bucket()
    client = moto_server.client()
    local = tmp_path / "local"
    make_bundle(local)
    for name in ("manifest.json", "report.md"):
        client.put_object(Bucket=bucket, Key=f"in/daily/{name}", Body=(local / name).read_bytes())
    client.put_object(Bucket=bucket, Key="in/daily/summary.txt", Body=b"Summary!")
    config = tmp_path / "c.yml"
    config.write_text(
        "pipelines:\n  - id: reports\n    source:\n      backend: s3\n"
        f"      bucket: {bucket}\n      prefix: in\n      region: {moto_server.region}\n"
        f"      endpoint: {moto_server.endpoint_url}\n      force_path_style: true\n"
        "      credentials: {access_key_id_env: INSPECT_KEY, secret_access_key_env: INSPECT_SECRET}\n"
        "    destinations:\n      - {id: archive, backend: local, path: out}\n"
    )
    env = {"INSPECT_KEY": moto_server.access_key_id, "INSPECT_SECRET": moto_server.secret_access_key}
    result = run_script("inspect", "-config", str(config), "-pipeline=reports", "-format=json", env=env)
    assert result.returncode == 1, result.stderr
    files = json.loads(result.stdout)["result"]["bundles"][0]["files"]
    assert [(f["path"], f["ok"]) for f in files] == [("report.md", True), ("summary.txt", False)]
    assert (files[1]["actual_size"], files[1]["actual_sha256"]) == (8, _sha(b"Summary!"))
    assert result.stderr == (
        f"distributor: invalid bundle daily: file summary.txt sha256 {_sha(b'Summary!')} "
        f"does not match manifest sha256 {_sha(SUMMARY)}\n"
    )


@pytest.mark.sftp
def test_inspect_config_over_sftp_reports_actual_bytes(sshd_server: SSHDServer, tmp_path: Path) -> None:
    root = sshd_server.make_sftp_root()
    make_bundle(root / "daily")
    stormy = b"# Report\nStormy and much longer.\n"
    (root / "daily" / "report.md").write_bytes(stormy)
    sshd_server.chown_to_user(root)
    config = tmp_path / "c.yml"
    config.write_text(
        "pipelines:\n  - id: reports\n    source:\n      backend: ssh\n"
        f"      host: {sshd_server.host}\n      port: {sshd_server.port}\n      user: {sshd_server.user}\n"
        f"      path: {root}\n      private_key_file: {sshd_server.client_key_path}\n"
        f"      known_hosts_file: {sshd_server.known_hosts_path}\n"
        "    destinations:\n      - {id: archive, backend: local, path: out}\n"
    )
    result = run_script("inspect", "--config", str(config), "--pipeline", "reports")
    assert result.returncode == 1
    assert result.stderr == (
        "distributor: invalid bundle daily: file report.md size 33 does not match manifest size 16\n"
    )
    report_line = _file_lines(result.stdout)[0]
    assert f"actual_size=33 actual_sha256={_sha(stormy)} ok=false" in report_line
