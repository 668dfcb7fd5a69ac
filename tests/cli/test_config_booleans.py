"""YAML 1.1 booleans in a config the Go tool accepts (issue 15 item 6), through the console script."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bundle.conftest import make_bundle
from tests.cli.conftest import run_script


def _config(tmp_path: Path, destination: str) -> Path:
    make_bundle(tmp_path / "spool" / "daily")
    config = tmp_path / "distributor.yml"
    config.write_text(
        "pipelines:\n"
        "  - id: 'on'\n"  # a string field keeps the word
        "    source: {backend: local, path: spool}\n"
        "    destinations:\n"
        f"      - {{id: yes, backend: local, path: 'no', {destination}}}\n"
    )
    return config


def test_run_decodes_yes_no_on_in_boolean_fields_only(tmp_path: Path) -> None:
    config = _config(tmp_path, "publish: {source: no, html: Yes}, transform: {markdown_to_html: {enabled: ON}}")
    result = run_script("run", "--config", str(config), "--format", "json")
    assert (result.returncode, result.stderr) == (0, "")
    action = json.loads(result.stdout)["result"]["actions"][0]
    assert (action["pipeline_id"], action["destination_id"]) == ("on", "yes")
    assert [(o["path"], o["kind"]) for o in action["outputs"]] == [("report.html", "generated")]
    published = tmp_path / "no" / "daily"
    assert sorted(p.name for p in published.iterdir()) == [".distributor.json", "report.html"]


def test_prune_enabled_off_and_on(tmp_path: Path) -> None:
    config = _config(tmp_path, "retention: {prune: {enabled: off, keep_latest: 0}}")
    assert run_script("run", "-config", str(config)).returncode == 0
    select = ["--config", str(config), "--pipeline", "on", "--destination", "yes", "--bundle", "daily"]
    disabled = run_script("prune", *select, "--dry-run", "--format", "json")
    assert json.loads(disabled.stdout)["result"]["enabled"] is False
    config.write_text(config.read_text().replace("enabled: off", "enabled: 'On'"))
    enabled = run_script("prune", *select, "--dry-run", "--format", "json")
    doc = json.loads(enabled.stdout)["result"]
    assert (doc["enabled"], len(doc["planned_outputs"])) == (True, 2)


def test_other_spellings_stay_errors(tmp_path: Path) -> None:
    config = _config(tmp_path, "publish: {source: yEs}")
    result = run_script("validate", "--config", str(config), "--pipeline", "on")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "distributor: invalid config: pipelines[0].destinations[0].publish.source must be a boolean\n"
    )
