"""Every example config runs end to end through the installed ``distributor`` console script.

Local examples run as shipped (in a copy of ``examples/``, so outputs land in a temporary
``demo-output/``). The SFTP and S3 examples keep their own policies and source but point their
remote fields at the real test peers (sshd and moto on 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from distributor_core.state import parse_state_document

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SCRIPT = Path(sys.executable).parent / "distributor"

LOCAL_EXAMPLES = {
    "local-publish.yml": 1,
    "fan-out.yml": 2,
    "archive-and-latest.yml": 2,
    "merge-reconciliation.yml": 1,
    "shared-root.yml": 2,
    "takeover-latest.yml": 2,
    "local-index.yml": 1,
    "reports.yml": 4,  # archive: both bundles; latest and site: the newest
}


def _copy_examples(tmp_path: Path) -> Path:
    target = tmp_path / "examples"
    shutil.copytree(EXAMPLES, target, ignore=shutil.ignore_patterns("dagster", ".distributor"))
    return target


def _run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    result = subprocess.run(
        [str(SCRIPT), *args, "--format", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    document = json.loads(result.stdout)
    assert document["ok"] is True
    return document["result"]


def _assert_state_matches_files(root: Path) -> None:
    for state_file in root.rglob(".distributor.json"):
        document = parse_state_document(state_file.read_bytes())
        for output in document.outputs:
            assert (state_file.parent / output.path).is_file(), output.path
    leftovers = [p for p in root.rglob("*") if p.name.startswith((".distributor-tmp-", ".distributor-bak-"))]
    leftovers += list(root.rglob(".distributor.lock")) + list(root.rglob(".distributor.pending.json"))
    assert leftovers == []


@pytest.mark.parametrize("name", sorted(LOCAL_EXAMPLES))
def test_local_example_publishes_then_skips(tmp_path: Path, name: str) -> None:
    examples = _copy_examples(tmp_path)
    config = str(examples / name)
    dry = _run("run", "--config", config, "--dry-run")
    assert [a["status"] for a in dry["actions"]] == ["planned"] * LOCAL_EXAMPLES[name]
    assert not (tmp_path / "demo-output").exists()

    first = _run("run", "--config", config)
    assert [a["action"] for a in first["actions"]] == ["publish_new"] * LOCAL_EXAMPLES[name]
    assert all(a["status"] == "completed" and a["bytes_written"] > 0 for a in first["actions"])
    _assert_state_matches_files(tmp_path / "demo-output")

    second = _run("run", "--config", config)
    assert [a["action"] for a in second["actions"]] == ["skip_same"] * LOCAL_EXAMPLES[name]
    assert second["summary"]["skip_same"] == LOCAL_EXAMPLES[name]


def test_local_publish_prune_and_repair_follow_the_example_policy(tmp_path: Path) -> None:
    examples = _copy_examples(tmp_path)
    config = str(examples / "local-publish.yml")
    _run("run", "--config", config)
    selection = ["--pipeline", "example-source-bundle", "--destination", "local-archive"]
    plan = _run("prune", "--config", config, *selection, "--dry-run")
    (bundle,) = plan["bundles"]  # retention.prune.bundles looks at every bundle path: the root here
    assert bundle["bundle_path"] == "" and bundle["enabled"] is True and bundle["checked_count"] == 2
    assert bundle["bundle_retention"]["action"] == "keep"  # one of the 30 newest bundles
    assert bundle["planned_outputs"] == [] and [o["path"] for o in bundle["preserved_outputs"]] == [
        "report.md", "summary.txt"]

    archive = tmp_path / "demo-output" / "local-publish" / "archive"
    (archive / "summary.txt").unlink()
    repaired = _run("reconcile-state", "--config", config, *selection)
    assert repaired["changed"] is True
    assert [m["path"] for m in repaired["missing_managed_outputs"]] == ["summary.txt"]
    _assert_state_matches_files(archive)


def _with_remote(example: Path, update: dict) -> Path:
    document = yaml.safe_load(example.read_text())
    destination = document["pipelines"][0]["destinations"][0]
    destination.update(update)
    document.pop("secrets", None)
    target = example.with_name(f"peer-{example.name}")
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return target


@pytest.mark.sftp
def test_ssh_example_against_the_sshd_peer(tmp_path: Path, sshd_server) -> None:
    examples = _copy_examples(tmp_path)
    root = sshd_server.make_sftp_root()
    config = _with_remote(
        examples / "ssh-destination.yml",
        {
            "host": sshd_server.host,
            "port": sshd_server.port,
            "user": sshd_server.user,
            "path": str(root),
            "private_key_file": str(sshd_server.client_key_path),
            "known_hosts_file": str(sshd_server.known_hosts_path),
        },
    )
    first = _run("run", "--config", str(config))
    assert [a["action"] for a in first["actions"]] == ["publish_new"]
    second = _run("run", "--config", str(config))
    assert [a["action"] for a in second["actions"]] == ["skip_same"]
    repaired = _run(
        "reconcile-state", "--config", str(config), "--pipeline", "example-ssh", "--destination", "sftp-archive",
        "--dry-run",
    )
    assert (repaired["backend"], repaired["checked_count"], repaired["missing_managed_outputs"]) == ("ssh", 2, [])


@pytest.mark.s3
def test_s3_example_against_the_moto_peer(tmp_path: Path, moto_server) -> None:
    examples = _copy_examples(tmp_path)
    bucket = moto_server.create_bucket()
    config = _with_remote(examples / "s3-destination.yml", {"bucket": bucket, "endpoint": moto_server.endpoint_url})
    env = {
        "DISTRIBUTOR_S3_ACCESS_KEY_ID": moto_server.access_key_id,
        "DISTRIBUTOR_S3_SECRET_ACCESS_KEY": moto_server.secret_access_key,
    }
    first = _run("run", "--config", str(config), env=env)
    assert [a["action"] for a in first["actions"]] == ["publish_new"]
    keys = sorted(o["Key"] for o in moto_server.client().list_objects_v2(Bucket=bucket)["Contents"])
    assert keys == ["reports/daily/.distributor.json", "reports/daily/report.md", "reports/daily/summary.txt"]
    second = _run("run", "--config", str(config), env=env)
    assert [a["action"] for a in second["actions"]] == ["skip_same"]
    pruned = _run(
        "prune", "--config", str(config), "--pipeline", "example-s3", "--destination", "s3-archive", "--dry-run",
        env=env,
    )
    assert (pruned["backend"], pruned["root_path"]) == ("s3", "reports/daily")
