"""Shaping the assets (issue 25 item 2): the config's ``dagster`` blocks and a translator subclass
show up where a team looks (``dg list defs --json``: owners, tags, kinds, groups, descriptions,
upstream edges from plain ``@asset``s), publications still land under translated keys, and a block
Dagster would refuse fails the load naming the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest

from distributor_core.config import ConfigError
from distributor_dagster import build_definitions
from tests.dagster.conftest import REPO, copy_example_bundle, frozen_clock, materializations, write_config

pytestmark = pytest.mark.dagster

BIN = Path(sys.executable).parent


def list_defs(project: Path, *pythonpath: Path) -> dict[str, dict]:
    """``dg list defs --json`` in ``project``: the assets by key."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (REPO, *pythonpath)))}
    listed = subprocess.run([str(BIN / "dg"), "list", "defs", "--json"], cwd=project, env=env,
                            capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr
    return {asset["asset_key"]: asset for asset in json.loads(listed.stdout)["assets"]}


def owners(asset: dict) -> list[str]:
    """Owners as they are written (``dg`` lists ``{"team": ...}`` or ``{"email": ...}``)."""
    return [f"team:{o['team']}" if "team" in o else o["email"] for o in asset["owners"]]


def tags(asset: dict) -> dict[str, str]:
    return {tag["key"]: tag["value"] for tag in asset["tags"]}


def test_the_dg_project_example_shows_owners_tags_and_the_producer_upstream() -> None:
    project = REPO / "examples" / "dagster" / "dg-project"
    assets = list_defs(project, project / "src")

    source = assets["site_reports"]
    assert source["dependency_keys"] == ["finance/daily_report"]  # the producer's plain @asset
    assert owners(source) == ["team:reports"] and source["group_name"] == "reports"
    assert tags(source)["domain"] == "finance" and tags(source)["distributor/pipeline"] == "site-reports"
    assert source["kinds"] == ["file"]

    html = assets["site_reports/html"]
    assert html["description"] == "The public report site (reports.example.com), one folder per bundle"
    assert owners(html) == ["team:reports", "web@example.com"] and html["group_name"] == "reports"
    assert tags(html) | {"domain": "finance", "tier": "public", "distributor/destination": "html"} == tags(html)
    archive = assets["site_reports/archive"]
    assert archive["description"].startswith(
        f"Destination archive of pipeline site-reports: {(REPO / 'demo-output' / 'dg-project' / 'archive').as_uri()}"
    )
    assert "tier" not in tags(archive)  # the html destination's own tag
    assert assets["finance/daily_report"]["group_name"] == "finance"


CONFIG = """
pipelines:
  - id: reports
    source: {backend: local, path: source}
    dagster:
      owners: [team:reports]
      tags: {domain: finance}
    destinations:
      - id: web
        backend: local
        path: out/web
      - id: latest
        backend: local
        path: out/latest
        path_mapping: {mode: fixed}
        dagster: {group: serving, kinds: [nginx]}
"""

COMPONENTS = '''
import dagster as dg
from distributor_dagster import DistributorComponent, DistributorTranslator


class SiteTranslator(DistributorTranslator):
    """Keys under publications/, every destination owned by ops too and downstream of approval."""

    def get_asset_key(self, props):
        return super().get_asset_key(props).with_prefix("publications")

    def get_owners(self, props):
        extra = ["ops@example.com"] if props.role == "destination" else []
        return [*super().get_owners(props), *extra]

    def get_kinds(self, props):
        return {*super().get_kinds(props), "report"}

    def get_deps(self, props):
        return [*super().get_deps(props), *([dg.AssetKey("approval")] if props.role == "destination" else [])]

    def get_description(self, props):
        return f"{props.role} of {props.pipeline.id}: " + super().get_description(props)


class SiteDistributor(DistributorComponent):
    def get_translator(self):
        return SiteTranslator()
'''


def write_project(root: Path) -> Path:
    """A dg project: the plain asset ``approval`` and a DistributorComponent subclass whose
    translator moves, owns, tags and wires the pipeline's assets."""
    package = root / "src" / "site_pkg"
    (package / "defs" / "publications").mkdir(parents=True)
    (root / "pyproject.toml").write_text(textwrap.dedent("""
        [project]
        name = "site-pkg"
        version = "0"
        [tool.dg]
        directory_type = "project"
        [tool.dg.project]
        root_module = "site_pkg"
        registry_modules = ["distributor_dagster", "site_pkg.components"]
    """))
    (package / "__init__.py").write_text("")
    (package / "components.py").write_text(COMPONENTS)
    (package / "definitions.py").write_text(textwrap.dedent("""
        from pathlib import Path
        import dagster as dg

        @dg.definitions
        def defs():
            return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
    """))
    (package / "defs" / "__init__.py").write_text("")
    (package / "defs" / "approval.py").write_text(textwrap.dedent("""
        import dagster as dg

        @dg.asset
        def approval() -> None:
            "Someone approved today's reports."
    """))
    folder = package / "defs" / "publications"
    write_config(folder, CONFIG)
    copy_example_bundle(folder / "source" / "2026-06-08")
    (folder / "defs.yaml").write_text("type: site_pkg.components.SiteDistributor\nattributes:\n"
                                      "  config_path: distributor.yml\n")
    return root


def test_a_translator_subclass_shapes_keys_owners_kinds_and_upstream_edges(tmp_path: Path) -> None:
    project = write_project(tmp_path / "project")
    assets = list_defs(project, project / "src")

    assert set(assets) == {
        "approval", "publications/reports", "publications/reports/newest",
        "publications/reports/web", "publications/reports/latest",
    }
    web = assets["publications/reports/web"]
    assert sorted(web["dependency_keys"]) == ["approval", "publications/reports"]
    assert owners(web) == ["team:reports", "ops@example.com"]
    assert sorted(web["kinds"]) == ["file", "report"]
    assert web["description"].startswith("destination of reports: Destination web of pipeline reports")
    assert tags(web)["domain"] == "finance"
    latest = assets["publications/reports/latest"]
    assert sorted(latest["dependency_keys"]) == ["approval", "publications/reports/newest"]
    assert latest["group_name"] == "serving" and sorted(latest["kinds"]) == ["file", "nginx", "report"]
    source = assets["publications/reports"]
    assert owners(source) == ["team:reports"] and source["dependency_keys"] == []


def test_publications_land_under_the_translated_keys(tmp_path: Path) -> None:
    """A translated key is the asset a run materializes and checks: the publication itself is the
    same (the files at the destination)."""
    from distributor_dagster import DistributorTranslator

    class Prefixed(DistributorTranslator):
        def get_asset_key(self, props):  # type: ignore[no-untyped-def]
            return super().get_asset_key(props).with_prefix("publications")

    config = write_config(tmp_path, CONFIG)
    copy_example_bundle(tmp_path / "source" / "2026-06-08")
    defs = build_definitions(config, translator=Prefixed(), clock=frozen_clock)
    web = dg.AssetKey(["publications", "reports", "web"])
    job = defs.resolve_implicit_global_asset_job_def().get_subset(asset_selection={web})
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("publications/reports__published", ["2026-06-08"])
        result = job.execute_in_process(instance=instance, partition_key="2026-06-08", raise_on_error=False)
        assert result.success
        assert [(e.asset_key, e.partition) for e in materializations(result)] == [(web, "2026-06-08")]
        checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [dg.AssetCheckKey(web, "managed_outputs_present")]
        )
        assert checks[dg.AssetCheckKey(web, "managed_outputs_present")].status.value == "SUCCEEDED"
    assert (tmp_path / "out" / "web" / "2026-06-08" / "report.md").is_file()


def test_a_dagster_block_dagster_would_refuse_names_the_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, """
        pipelines:
          - id: reports
            source: {backend: local, path: source}
            dagster:
              group: finance-reports
              owners: [team:reports, bob]
              tags: {"tier one": gold, distributor/pipeline: other}
            destinations:
              - id: web
                backend: local
                path: out/web
                dagster:
                  deps: [analytics//daily]
                  tags: {tier: "gold plated"}
    """)
    with pytest.raises(ConfigError) as raised:
        build_definitions(config)
    messages = raised.value.messages
    assert messages[0].startswith('pipelines[0].dagster.group: "finance-reports" is not a valid asset group name')
    assert messages[1] == ("pipelines[0].dagster.owners[1]: 'bob' is not an owner Dagster accepts (an email "
                           "address, or a team name written team:<name>)")
    assert messages[2].startswith("pipelines[0].dagster.tags.tier one: Found invalid tag keys: ['tier one']")
    assert messages[3] == "pipelines[0].dagster.tags.distributor/pipeline: the distributor/ tags are set by distributor"
    assert messages[4].startswith("pipelines[0].destinations[0].dagster.tags.tier: Invalid tag value: gold plated")
    assert messages[5] == ("pipelines[0].destinations[0].dagster.deps[0]: 'analytics//daily' is not an asset key: "
                           "write its components joined by / (e.g. analytics/daily_report)")
    assert len(messages) == 6
    # the CLI reads the same file and ignores the block
    (tmp_path / "source").mkdir()
    ran = subprocess.run([str(BIN / "distributor"), "run", "--config", str(config), "--dry-run"],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr


def test_an_empty_group_is_refused_naming_the_key_and_an_empty_description_is_the_generated_one(
    tmp_path: Path,
) -> None:
    """``""`` is a value of the free-text ``dagster`` keys (elsewhere it means the key's default)."""
    config = write_config(tmp_path, """
        pipelines:
          - id: reports
            source: {backend: local, path: source}
            dagster: {description: ""}
            destinations:
              - {id: web, backend: local, path: out/web, dagster: {group: ""}}
    """)
    with pytest.raises(ConfigError) as raised:
        build_definitions(config)
    (message,) = raised.value.messages
    assert message.startswith("pipelines[0].destinations[0].dagster.group: Empty asset group name was provided")
    config.write_text(config.read_text().replace('group: ""', "group: web"))
    source = build_definitions(config).resolve_all_asset_specs()
    described = {spec.key.to_user_string(): spec.description for spec in source}
    assert described["reports"].startswith("Source of pipeline reports:")
