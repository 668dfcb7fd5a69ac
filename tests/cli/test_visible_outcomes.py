"""Outcomes a newcomer could miss are said in the text a command prints (issue: a newcomer's
first hour): what a forced replacement deletes."""

from __future__ import annotations

from pathlib import Path

from tests.bundle.conftest import make_bundle
from tests.cli.conftest import run_script as run


def forced_setup(tmp_path: Path) -> Path:
    make_bundle(tmp_path / "spool" / "daily")
    latest = tmp_path / "latest"
    (latest / "old").mkdir(parents=True)
    (latest / "old" / "stray.txt").write_text("not distributor's\n")
    (latest / "report.md").write_text("an older copy, no state\n")
    config = tmp_path / "distributor.yml"
    config.write_text(
        "pipelines:\n"
        "  - id: reports\n"
        "    source: {backend: local, path: spool}\n"
        "    destinations:\n"
        "      - {id: latest, backend: local, path: latest, path_mapping: {mode: fixed}}\n"
    )
    return config


def test_a_text_dry_run_of_a_forced_replacement_lists_what_it_would_delete(tmp_path: Path) -> None:
    config = forced_setup(tmp_path)
    dry = run("run", "--config", str(config), "--dry-run", "--force")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0].startswith("Action: pipeline=reports destination=latest") and "action=force_replace" in lines[0]
    assert lines[1] == "Delete: pipeline=reports destination=latest destination_path=. path=old/stray.txt"
    assert lines[2].startswith("Run: ")
    assert (tmp_path / "latest" / "old" / "stray.txt").exists()  # a dry run
    forced = run("run", "--config", str(config), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "Delete: pipeline=reports destination=latest destination_path=. path=old/stray.txt" in forced.stdout
    assert not (tmp_path / "latest" / "old" / "stray.txt").exists()


def test_run_on_a_config_of_http_upload_pipelines_says_to_serve_it(tmp_path: Path) -> None:
    config = tmp_path / "uploads.yml"
    config.write_text(
        "upload_tokens: [{id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [uploads]}]\n"
        "pipelines:\n"
        "  - id: uploads\n"
        "    source: {backend: http_upload}\n"
        "    destinations: [{id: archive, backend: local, path: published}]\n"
    )
    for extra in ((), ("--dry-run",), ("--pipeline", "uploads")):
        result = run("run", "--config", str(config), *extra)
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr == (
            "distributor: nothing to run: pipeline uploads is http_upload (producers push their bundles over HTTP); "
            f"`distributor serve --config {config}` accepts and publishes them\n")
    assert not (tmp_path / "published").exists()
