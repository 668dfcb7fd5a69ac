"""``distributor config check``: load, validate, resolve secrets and roots, contact nothing unless
``--connect``; every problem named with its remedy, exit 1."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import yaml

from tests.cli.conftest import REPO
from tests.cli.conftest import run_script as run


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "distributor.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def s3_config(tmp_path: Path, port: int) -> Path:
    (tmp_path / "spool").mkdir(exist_ok=True)
    return write(tmp_path, {"pipelines": [{
        "id": "reports", "source": {"backend": "local", "path": "spool"},
        "destinations": [
            {"id": "archive", "backend": "local", "path": "out/archive"},
            {"id": "bucket", "backend": "s3", "bucket": "reports", "endpoint": f"http://127.0.0.1:{port}",
             "region": "us-east-1", "force_path_style": True, "credentials": {"access_key_id_env": "CHECK_KEY_ID",
                                                    "secret_access_key_env": "CHECK_SECRET"}},
        ],
    }]})


def test_an_example_config_checks_without_touching_its_roots(tmp_path: Path) -> None:
    result = run("config", "check", "--config", "examples/local-publish.yml")
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Config: path={REPO}/examples/local-publish.yml status=ok pipelines=1 destinations=1")
    assert lines[1] == (f"Source: pipeline=example-source-bundle backend=local root={REPO}/examples/source-bundle "
                        "status=resolved")
    assert lines[2].startswith("Destination: pipeline=example-source-bundle destination=local-archive backend=local")


def test_without_connect_nothing_is_reached_and_with_it_an_unreachable_root_is_named(tmp_path: Path) -> None:
    config = s3_config(tmp_path, closed_port())
    env = {"CHECK_KEY_ID": "id", "CHECK_SECRET": "secret"}
    offline = run("config", "check", "--config", str(config), "--format", "json", env=env)
    assert offline.returncode == 0, offline.stderr
    roots = json.loads(offline.stdout)["result"]["roots"]
    assert [(r["role"], r.get("destination_id"), r["status"]) for r in roots] == [
        ("source", None, "resolved"), ("destination", "archive", "resolved"), ("destination", "bucket", "resolved")]
    assert not (tmp_path / "out").exists()

    connected = run("config", "check", "--config", str(config), "--connect", env=env)
    assert connected.returncode == 1
    assert "Source: pipeline=reports backend=local" in connected.stdout and "status=ok" in connected.stdout
    assert "destination=archive backend=local" in connected.stdout and "status=absent" in connected.stdout
    assert "destination=bucket backend=s3" in connected.stdout and "status=unreachable_root" in connected.stdout
    (problem,) = connected.stderr.splitlines()
    assert problem.startswith("distributor: config check: pipeline reports destination bucket: ")
    assert "remedy: check that the S3 endpoint" in problem
    assert not (tmp_path / "out").exists()  # a connect looks, it creates nothing


def test_every_unresolved_secret_and_missing_source_is_reported(tmp_path: Path) -> None:
    config = s3_config(tmp_path, closed_port())
    doc = yaml.safe_load(config.read_text())
    doc["pipelines"][0]["source"]["path"] = "no-such-spool"
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = run("config", "check", "--config", str(config), "--connect")
    assert result.returncode == 1
    problems = result.stderr.splitlines()
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"distributor: config check: pipeline reports source path {tmp_path}/no-such-spool "
                                  "not found")
    assert "CHECK_KEY_ID is not set" in problems[1] and "remedy: export CHECK_KEY_ID" in problems[1]
    assert "status=missing_source_root" in result.stdout and "status=missing_credential" in result.stdout


def test_an_invalid_config_names_its_field_and_a_missing_default_says_how_to_name_one(tmp_path: Path) -> None:
    bad = write(tmp_path, {"pipelines": [{"id": "reports", "source": {"backend": "nfs"}}]})
    invalid = run("config", "check", "--config", str(bad))
    assert invalid.returncode == 1 and invalid.stdout == ""
    assert "backend" in invalid.stderr
    missing = run("config", "check", cwd=tmp_path / "..")
    assert missing.returncode == 1
    assert missing.stderr.startswith("distributor: no config: ./distributor.yml does not exist and no --config was "
                                     "given; name one with --config <path>")
