"""Loading: every example loads with the exact names of dagster.md §2, loading never touches
storage, invalid configs and name collisions fail the load with clear messages (E3), options,
the ``DISTRIBUTOR_CONFIG`` module and the dg component."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster.components.testing import create_defs_folder_sandbox
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from distributor_core.config import ConfigError, load_config
from distributor_dagster import BuildOptions, DistributorComponent, NameCollisionError, build_definitions
from distributor_dagster.location import DistributorConfigError, definitions_from_environment, options_from_environment
from distributor_dagster.names import sanitize
from tests.dagster.conftest import REPO, write_config

pytestmark = pytest.mark.dagster

EXAMPLES = sorted((REPO / "examples").glob("*.yml"))
BIN = Path(sys.executable).parent
CHECKS = {"state_valid", "managed_outputs_present", "no_unmanaged_content"}


def expected_names(config_path: Path) -> dict[str, set]:
    config = load_config(config_path)
    jobs, sensors, assets, groups, checks = {"prune", "reconcile_state", "audit"}, set(), set(), set(), set()
    for pipeline in config.pipelines:
        p = sanitize(pipeline.id)
        jobs.add(f"publish_{p}")
        groups.add(p)
        assets.add((p,))  # the source asset
        checks.add(((p,), "bundle_valid"))  # the source's check
        sensors.add(f"uploads_{p}" if pipeline.is_upload else f"watch_{p}")
        modes = {d.path_mapping.mode == "fixed" or pipeline.is_upload for d in pipeline.destinations}
        if modes == {True, False}:  # per-bundle and fixed destinations: the newest bundle view
            assets.add((p, "newest"))
            checks.add(((p, "newest"), "bundle_valid"))
        for destination in pipeline.destinations:
            d = sanitize(destination.id)
            assets.add((p, d))
            checks |= {((p, d), name) for name in CHECKS}
    return {"jobs": jobs, "sensors": sensors, "assets": assets, "groups": groups, "checks": checks}


def partitioned_keys(config_path: Path) -> set[tuple[str, ...]]:
    """Issue 24: a source with per-bundle destinations, and those destinations, are partitioned."""
    keys = set()
    for pipeline in load_config(config_path).pipelines:
        p = sanitize(pipeline.id)
        per_bundle = [d for d in pipeline.destinations if d.path_mapping.mode != "fixed" and not pipeline.is_upload]
        if per_bundle:
            keys.add((p,))
        keys |= {(p, sanitize(d.id)) for d in per_bundle}
    return keys


def actual_names(defs: dg.Definitions) -> dict[str, set]:
    graph = defs.resolve_asset_graph()
    specs = list(defs.resolve_all_asset_specs())
    return {
        "jobs": {job.name for job in defs.resolve_all_job_defs()} - {"__ASSET_JOB"},
        "sensors": {sensor.name for sensor in defs.sensors or []},
        "assets": {tuple(spec.key.path) for spec in specs},
        "groups": {spec.group_name for spec in specs},
        "checks": {(tuple(key.asset_key.path), key.name) for key in graph.asset_check_keys},
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_loads_with_the_specified_names(path: Path) -> None:
    defs = build_definitions(path)
    dg.Definitions.validate_loadable(defs)
    assert actual_names(defs) == expected_names(path)
    graph = defs.resolve_asset_graph()
    partitioned = {tuple(key.path) for key in graph.get_all_asset_keys() if graph.get(key).is_partitioned}
    assert partitioned == partitioned_keys(path)


def test_names_of_the_local_publish_example_exactly() -> None:
    defs = build_definitions(REPO / "examples" / "local-publish.yml")
    names = actual_names(defs)
    assert names["jobs"] == {"publish_example_source_bundle", "prune", "reconcile_state", "audit"}
    assert names["sensors"] == {"watch_example_source_bundle"}
    assert names["assets"] == {("example_source_bundle",), ("example_source_bundle", "local_archive")}
    assert names["groups"] == {"example_source_bundle"}
    job = defs.resolve_job_def("publish_example_source_bundle")
    (node,) = job.graph.nodes
    assert node.name == "example_source_bundle"
    assert [n.name for n in node.definition.nodes_in_topological_order] == [
        "discover", "validate", "publish_local_archive"
    ]
    for name in ("prune", "reconcile_state", "audit"):  # site-wide, one step named like the job
        assert [node.name for node in defs.resolve_job_def(name).graph.nodes] == [name]
    specs = {spec.key: spec for spec in defs.resolve_all_asset_specs()}
    spec = specs[dg.AssetKey(["example_source_bundle", "local_archive"])]
    assert spec.tags["distributor/pipeline"] == "example-source-bundle"
    assert spec.tags["distributor/destination"] == "local-archive"
    assert spec.metadata["pipeline_id"] == "example-source-bundle"
    assert spec.metadata["destination_id"] == "local-archive"
    root = (REPO / "demo-output" / "local-publish" / "archive").resolve()
    assert spec.metadata["dagster/uri"] == root.as_uri()
    assert spec.description.startswith(f"Destination local-archive of pipeline example-source-bundle: {root.as_uri()}")
    assert spec.kinds == {"file"} and spec.group_name == "example_source_bundle"
    assert {dep.asset_key for dep in spec.deps} == {dg.AssetKey(["example_source_bundle"])}
    source = specs[dg.AssetKey(["example_source_bundle"])]
    assert source.kinds == {"file"} and source.group_name == "example_source_bundle"
    assert source.metadata["dagster/uri"] == (REPO / "examples" / "source-bundle").resolve().as_uri()
    graph = defs.resolve_asset_graph()
    assert graph.get(spec.key).is_materializable and graph.get(source.key).is_observable
    assert graph.get(spec.key).code_version.startswith("0.1.0-")
    # a partition per bundle the destination holds, mapped one to one onto the source's partitions:
    # the bundles it holds (issue 37)
    partitions = graph.get(spec.key).partitions_def
    assert isinstance(partitions, dg.DynamicPartitionsDefinition)
    assert partitions.name == "example_source_bundle__published"
    assert graph.get(source.key).partitions_def == dg.DynamicPartitionsDefinition(name="example_source_bundle__bundles")
    assert isinstance(graph.get_partition_mapping(spec.key, source.key), dg.IdentityPartitionMapping)
    assert graph.get(spec.key).backfill_policy == dg.BackfillPolicy.multi_run(100)


def test_a_mixed_pipeline_gets_a_newest_bundle_view_upstream_of_its_fixed_destination() -> None:
    """Issue 24 item 2: a fixed destination stays unpartitioned and is compared with the newest
    bundle, the one it would take; per-bundle destinations hang off the partitioned source."""
    defs = build_definitions(REPO / "examples" / "archive-and-latest.yml")
    graph = defs.resolve_asset_graph()
    p = "example_archive_and_latest"
    source, newest = dg.AssetKey([p]), dg.AssetKey([p, "newest"])
    archive, latest = dg.AssetKey([p, "archive"]), dg.AssetKey([p, "latest"])
    assert graph.get(source).is_partitioned and graph.get(archive).is_partitioned
    assert not graph.get(newest).is_partitioned and not graph.get(latest).is_partitioned
    assert graph.get(archive).parent_keys == {source}
    assert graph.get(latest).parent_keys == {newest}
    assert graph.get(newest).parent_keys == {source} and graph.get(newest).is_observable
    job = defs.resolve_job_def(f"publish_{p}")
    assert {node.name for node in job.graph.nodes} == {p, f"{p}__newest"}


def test_a_destination_named_like_the_newest_view_collides(tmp_path: Path) -> None:
    config = write_config(tmp_path, """\
pipelines:
  - id: p
    source: {backend: local, path: source}
    destinations:
      - {id: archive, backend: local, path: out/archive}
      - {id: newest, backend: local, path: out/newest, path_mapping: {mode: fixed}}
""")
    with pytest.raises(NameCollisionError, match="pipeline p and pipeline p destination newest both map to the "
                                                  "Dagster asset name 'p/newest'"):
        build_definitions(config)


def settings_fields(job: dg.JobDefinition) -> dict[str, dg.Field]:
    """The run settings a job's launchpad offers: ``resources.publish.config``."""
    resources = job.run_config_schema.config_type.fields["resources"].config_type.fields
    return resources["publish"].config_type.fields["config"].config_type.fields


def test_upload_pipelines_get_an_upload_sensor_and_an_optional_run_config() -> None:
    """Issue 37: a publish run takes its settings once, as the run-level resource ``publish``, and
    no graph takes op config. Every key is optional with its default (so "Execute checks" and
    Materialize need no config; without ``upload_run_id`` a run publishes the uploads still waiting,
    test_upload_sensor), and a code location offers only the keys its pipelines use: uploads take
    ``upload_run_id`` (one, the launchpad's) or ``upload_run_ids`` (a batch, the sensor's), sources
    ``bundle_path``."""
    defs = build_definitions(REPO / "examples" / "http-upload-local.yml")
    assert {s.name for s in defs.sensors} == {"uploads_example_http_upload"}
    fields = settings_fields(defs.resolve_job_def("publish_example_http_upload"))
    assert {name: field.default_value for name, field in fields.items()} == {
        "destinations": [], "upload_run_id": "", "upload_run_ids": [], "dry_run": False, "force": False,
        "republish": False,
    }
    assert not any(field.is_required for field in fields.values())
    local = build_definitions(REPO / "examples" / "archive-and-latest.yml")
    job = local.resolve_job_def("publish_example_archive_and_latest")
    fields = settings_fields(job)
    assert {name: field.default_value for name, field in fields.items()} == {
        "destinations": [], "bundle_path": "", "dry_run": False, "force": False, "republish": False,
    }
    # once for the run, whatever the graphs: the per-bundle one and the fixed destinations' one
    assert {node.name for node in job.graph.nodes} == {"example_archive_and_latest",
                                                        "example_archive_and_latest__newest"}
    ops = job.run_config_schema.config_type.fields["ops"].config_type.fields
    assert all(set(node.config_type.fields) == {"config"} for node in ops.values())
    assert all(not node.config_type.fields["config"].is_required and
               not node.config_type.fields["config"].default_provided for node in ops.values())
    # Materialize (the implicit asset job) offers the same settings
    assert settings_fields(local.resolve_implicit_global_asset_job_def()) == fields


def test_every_publish_graph_is_made_of_the_same_op_definitions(tmp_path: Path) -> None:
    """Issue 37 item 4: a code location grows with its destinations, not with op definitions: the
    graphs of every pipeline (per-bundle, fixed, upload) are nodes of one shared set, and the step
    keys stay ``<graph>.<step>``."""
    defs = build_definitions(REPO / "examples" / "archive-and-latest.yml")
    pipelines = "".join(
        f"  - id: p{i}\n    source: {{backend: local, path: src{i}}}\n    destinations:\n"
        f"      - {{id: archive, backend: local, path: out{i}/archive}}\n"
        f"      - {{id: latest, backend: local, path: out{i}/latest, path_mapping: {{mode: fixed}}}}\n"
        for i in range(5)
    )
    many = build_definitions(write_config(tmp_path, "pipelines:\n" + pipelines))

    def op_definitions(defs: dg.Definitions) -> set[str]:
        job = defs.resolve_implicit_global_asset_job_def()
        return {op.name for op in job.graph.iterate_op_defs() if not op.name.endswith("__observe")}

    assert op_definitions(defs) == op_definitions(many) == {
        "distributor__discover", "distributor__validate", "distributor__publish"
    }
    job = many.resolve_job_def("publish_p3")
    assert {node.name: [n.name for n in node.definition.nodes_in_topological_order] for node in job.graph.nodes} == {
        "p3": ["discover", "validate", "publish_archive"], "p3__newest": ["discover", "validate", "publish_latest"],
    }


def test_loading_never_touches_storage_or_the_network(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        """\
        secrets: {directory: secrets-that-do-not-exist}
        pipelines:
          - id: far
            source: {backend: ssh, host: 192.0.2.1, user: nobody, path: /srv/in, known_hosts_file: kh}
            destinations:
              - id: bucket
                backend: s3
                bucket: nowhere
                endpoint: http://192.0.2.1:9
                credentials: {access_key_id_env: UNSET_KEY_ID, secret_access_key_env: UNSET_SECRET}
              - id: disk
                backend: local
                path: not-created/yet
          - id: near
            source: {backend: local, path: missing-source}
            destinations:
              - {id: disk, backend: local, path: also-not-created}
        """,
    )
    before = sorted(p.name for p in tmp_path.iterdir())
    defs = build_definitions(config)
    dg.Definitions.validate_loadable(defs)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert {s.name for s in defs.sensors} == {"watch_far", "watch_near"}


def test_the_whole_location_builds_with_every_root_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12: loading the code location is a parse. With every option that adds definitions
    (eager automation, blocking checks, an upload pipeline) and every root unreachable (no route,
    no credentials, no directories, no staging area), the Definitions, their repository, the
    implicit asset job and every job build without opening a storage or a socket."""
    import socket

    import distributor_core.storage.factory as factory

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the code location load opened a storage or a socket")

    monkeypatch.setattr(factory, "_open", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    config = write_config(
        tmp_path,
        """\
        secrets: {directory: secrets-that-do-not-exist}
        server:
          http: {bind: 127.0.0.1:9, staging_root: staging/not-created}
        upload_tokens:
          - {id: up, token_env: UNSET_UPLOAD_TOKEN, allow_pipelines: [uploads]}
        pipelines:
          - id: far
            source: {backend: s3, bucket: nowhere, prefix: in, endpoint: http://192.0.2.1:9,
                     credentials: {access_key_id_env: UNSET_KEY_ID, secret_access_key_env: UNSET_SECRET}}
            destinations:
              - {id: web, backend: ssh, host: 192.0.2.1, user: nobody, path: /srv/www, known_hosts_file: kh}
              - {id: disk, backend: local, path: not-created/yet}
          - id: uploads
            source: {backend: http_upload}
            destinations:
              - id: bucket
                backend: s3
                bucket: nowhere
                endpoint: http://192.0.2.1:9
                credentials: {access_key_id_env: UNSET_KEY_ID, secret_access_key_env: UNSET_SECRET}
        """,
    )
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    defs = build_definitions(config, automation="eager", blocking_checks=["state_valid", "managed_outputs_present"])
    dg.Definitions.validate_loadable(defs)
    repository = defs.get_repository_def()
    jobs = {job.name for job in repository.get_all_jobs()}
    assert {"publish_far", "publish_uploads", "__ASSET_JOB"} <= jobs
    graph = repository.asset_graph
    assert {"/".join(k.path) for k in graph.get_all_asset_keys()} == {
        "far", "far/web", "far/disk", "uploads", "uploads/bucket",
    }
    assert graph.get(dg.AssetKey(["far", "web"])).parent_keys == {dg.AssetKey(["far"])}
    assert {s.name for s in defs.sensors} == {"watch_far", "uploads_uploads", "distributor_automation"}
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_an_invalid_config_fails_the_load_with_the_cli_message(tmp_path: Path) -> None:
    config = write_config(tmp_path, "pipelines:\n  - id: bad id\n    source: {backend: local, path: x}\n")
    cli = subprocess.run([str(BIN / "distributor"), "run", "--config", str(config)], capture_output=True, text=True)
    assert cli.returncode == 1
    with pytest.raises(ConfigError) as raised:
        build_definitions(config)
    assert cli.stderr.strip() == f"distributor: {raised.value}"
    with pytest.raises(DistributorConfigError) as wrapped:
        definitions_from_environment({"DISTRIBUTOR_CONFIG": str(config)})
    assert str(wrapped.value) == f"DISTRIBUTOR_CONFIG={config}: {raised.value}"


def test_the_code_location_load_fails_with_the_variable_and_the_cli_message(tmp_path: Path) -> None:
    config = write_config(tmp_path, "pipelines: []\nunknown: 1\n")
    with pytest.raises(ConfigError) as raised:
        build_definitions(config)
    message = str(raised.value)
    env = {**os.environ, "DISTRIBUTOR_CONFIG": str(config), "DAGSTER_HOME": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    run = subprocess.run(
        [str(BIN / "dagster"), "definitions", "validate", "-m", "distributor_dagster.definitions"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert run.returncode == 1
    assert f"DISTRIBUTOR_CONFIG={config}: {message}" in run.stdout + run.stderr


def test_the_definitions_module_names_the_variable() -> None:
    with pytest.raises(DistributorConfigError, match=r"^DISTRIBUTOR_CONFIG is not set"):
        definitions_from_environment({})
    with pytest.raises(DistributorConfigError) as missing:
        definitions_from_environment({"DISTRIBUTOR_CONFIG": "/nonexistent/distributor.yml"})
    assert str(missing.value).startswith("DISTRIBUTOR_CONFIG=/nonexistent/distributor.yml: cannot read config")
    with pytest.raises(DistributorConfigError, match="DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL must be a number"):
        definitions_from_environment(
            {"DISTRIBUTOR_CONFIG": str(EXAMPLES[0]), "DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL": "x"}
        )
    defs = definitions_from_environment(
        {"DISTRIBUTOR_CONFIG": str(REPO / "examples" / "local-publish.yml"),
         "DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL": "7", "DISTRIBUTOR_DAGSTER_SENSOR_STATUS": "running",
         "DISTRIBUTOR_DAGSTER_NAME_PREFIX": "acme_"}
    )
    (sensor,) = defs.sensors
    assert sensor.name == "acme_watch_example_source_bundle"
    assert sensor.minimum_interval_seconds == 7
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING


TWO = """\
pipelines:
  - id: {p1}
    source: {{backend: local, path: src}}
    destinations:
      - {{id: {d1}, backend: local, path: out1}}
  - id: {p2}
    source: {{backend: local, path: src}}
    destinations:
      - {{id: {d2}, backend: local, path: out2}}
"""


@pytest.mark.parametrize(
    ("p1", "d1", "p2", "d2", "first", "second"),
    [
        ("reports.daily", "a", "reports-daily", "b", "pipeline reports.daily", "pipeline reports-daily"),
        ("a", "b", "a__observe", "c", "pipeline a", "pipeline a__observe"),
        ("distributor__publish", "b", "c", "d", "the publish steps", "pipeline distributor__publish"),
    ],
)
def test_name_collisions_fail_the_load_naming_both(
    tmp_path: Path, p1: str, d1: str, p2: str, d2: str, first: str, second: str
) -> None:
    config = write_config(tmp_path, TWO.format(p1=p1, d1=d1, p2=p2, d2=d2))
    with pytest.raises(NameCollisionError) as raised:
        build_definitions(config)
    assert first in str(raised.value) and second in str(raised.value)


def test_destination_collisions_within_a_pipeline_name_both_pairs(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        """\
        pipelines:
          - id: site
            source: {backend: local, path: src}
            destinations:
              - {id: html.v1, backend: local, path: one}
              - {id: html-v1, backend: local, path: two}
        """,
    )
    with pytest.raises(NameCollisionError) as raised:
        build_definitions(config)
    message = str(raised.value)
    assert "pipeline site destination html.v1" in message and "pipeline site destination html-v1" in message
    assert "'site/html_v1'" in message


def test_job_names_and_op_names_share_one_namespace(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        """\
        pipelines:
          - id: p
            source: {backend: local, path: src}
            destinations:
              - {id: x, backend: local, path: one}
          - id: prune
            source: {backend: local, path: src}
            destinations:
              - {id: x, backend: local, path: two}
        """,
    )
    with pytest.raises(NameCollisionError) as raised:
        build_definitions(config)
    assert str(raised.value).startswith(
        "the maintenance jobs and pipeline prune both map to the Dagster job/op name 'prune'"
    )


def test_options_shape_names_and_sensors(tmp_path: Path) -> None:
    defs = build_definitions(
        REPO / "examples" / "fan-out.yml", name_prefix="team_", asset_key_prefix=["dist.ri"], sensor_interval=5,
        default_sensor_status="running",
    )
    names = actual_names(defs)
    assert names["jobs"] == {"team_publish_example_fan_out", "team_prune", "team_reconcile_state", "team_audit"}
    assert names["assets"] == {("dist_ri", "example_fan_out"), ("dist_ri", "example_fan_out", "source_archive"),
                               ("dist_ri", "example_fan_out", "html_site")}
    assert names["groups"] == {"team_example_fan_out"}
    (sensor,) = defs.sensors
    assert (sensor.name, sensor.minimum_interval_seconds) == ("team_watch_example_fan_out", 5)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    with pytest.raises(ValueError, match="name_prefix"):
        build_definitions(REPO / "examples" / "fan-out.yml", name_prefix="bad-prefix")
    with pytest.raises(ValueError, match="default_sensor_status"):
        build_definitions(REPO / "examples" / "fan-out.yml", default_sensor_status="sometimes")
    with pytest.raises(TypeError):
        build_definitions(REPO / "examples" / "fan-out.yml", unknown_option=1)


def test_one_options_type_for_keywords_the_component_and_the_variables() -> None:
    """The options are declared once (issue 39): build_definitions takes them as keywords or as one
    BuildOptions, the component's attributes are those fields and config_path, and each variable of
    the definitions module sets its option."""
    example = REPO / "examples" / "fan-out.yml"
    given_once = build_definitions(example, BuildOptions(sensor_interval=9, default_sensor_status="running"))
    as_keywords = build_definitions(example, sensor_interval=9, default_sensor_status="running")
    (sensor,), (same,) = given_once.sensors, as_keywords.sensors
    assert (sensor.minimum_interval_seconds, sensor.default_status) == (9, dg.DefaultSensorStatus.RUNNING)
    assert (same.minimum_interval_seconds, same.default_status) == (9, dg.DefaultSensorStatus.RUNNING)
    assert set(DistributorComponent.model_fields) == set(BuildOptions.model_fields) | {"config_path"}
    texts = {"sensor_interval": "7", "default_sensor_status": "running", "name_prefix": "acme_",
             "bundles_per_run": "3", "automation": "eager", "blocking_checks": "none", "digest_checks": "yes"}
    variables = BuildOptions.variables()
    assert set(variables) == set(texts)
    options = options_from_environment({variables[name]: text for name, text in texts.items()})
    assert options == BuildOptions(sensor_interval=7, default_sensor_status="running", name_prefix="acme_",
                                   bundles_per_run=3, automation="eager", blocking_checks=(), digest_checks=True)


def test_dg_lists_the_component() -> None:
    listed = subprocess.run([str(BIN / "dg"), "list", "components", "--json"], capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert "distributor_dagster.DistributorComponent" in listed.stdout


def test_the_component_loads_its_config_relative_to_its_defs_yaml() -> None:
    with create_defs_folder_sandbox() as sandbox:
        folder = sandbox.defs_folder_path / "publications"
        folder.mkdir()
        (folder / "distributor.yml").write_text((REPO / "examples" / "local-publish.yml").read_text())
        (folder / "defs.yaml").write_text(yaml.safe_dump({
            "type": "distributor_dagster.DistributorComponent",
            "attributes": {"config_path": "distributor.yml", "name_prefix": "dg_", "sensor_interval": 11},
        }))
        with sandbox.load_component_and_build_defs(defs_path=folder) as (component, defs):
            assert isinstance(component, DistributorComponent)
            assert {job.name for job in defs.resolve_all_job_defs()} >= {"dg_publish_example_source_bundle"}
            (sensor,) = defs.sensors
            assert sensor.minimum_interval_seconds == 11
            # relative paths inside the config resolve against the config file's directory (D4)
            specs = {spec.key: spec for spec in defs.resolve_all_asset_specs()}
            spec = specs[dg.AssetKey(["example_source_bundle", "local_archive"])]
            assert spec.metadata["configured_root"] == "../demo-output/local-publish/archive"
            root = (folder / ".." / "demo-output" / "local-publish" / "archive").resolve()
            assert spec.metadata["destination_root"] == root.as_uri() == spec.metadata["dagster/uri"]


def test_workspace_yaml_loads_the_code_location(tmp_path: Path) -> None:
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path),
           "DISTRIBUTOR_CONFIG": str(REPO / "examples" / "archive-and-latest.yml")}
    run = subprocess.run(
        [str(BIN / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        capture_output=True, text=True, env=env, cwd=REPO,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "distributor" in run.stdout + run.stderr


# ids chosen so that sanitising and the ``__`` separators of generated names can meet
PIPELINE_IDS = st.sampled_from(["a", "a_", "a.b", "a-b", "a__b", "a__b__c", "p"])
DESTINATION_IDS = st.sampled_from(["a", "b", "c", "b__c", "b.c", "a__load_state", "x", "x__load_state", "plan_x"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pipelines=st.lists(st.tuples(PIPELINE_IDS, st.lists(DESTINATION_IDS, min_size=1, max_size=3, unique=True)),
                          min_size=1, max_size=3, unique_by=lambda item: item[0]))
@example(pipelines=[("p", ["a"]), ("a.b", ["b"]), ("a-b", ["c"])])
def test_a_config_that_loads_never_collides_inside_dagster(tmp_path: Path, pipelines: list) -> None:
    """The only collision these ids can make is two pipeline ids that differ only in characters
    Dagster names do not allow (``a.b`` and ``a-b`` are both ``a_b``): that load fails naming both
    pipelines and the name; every other config loads into Dagster (no ``__`` separator of a
    generated name lets two owners meet)."""
    doc = {"pipelines": [
        {"id": pid, "source": {"backend": "local", "path": "src"},
         "destinations": [{"id": did, "backend": "local", "path": f"out/{i}/{j}"} for j, did in enumerate(dids)]}
        for i, (pid, dids) in enumerate(pipelines)
    ]}
    config = tmp_path / "generated.yml"
    config.write_text(yaml.safe_dump(doc))
    seen: dict[str, str] = {}
    clash = None
    for pid, _ in pipelines:
        name = re.sub(r"[^A-Za-z0-9_]", "_", pid)
        if name in seen:
            clash = (seen[name], pid, name)
            break
        seen[name] = pid
    if clash is not None:
        first, second, name = clash
        with pytest.raises(NameCollisionError) as info:
            build_definitions(config)
        assert str(info.value) == (
            f"pipeline {first} and pipeline {second} both map to the Dagster asset name {name!r}; rename one "
            "of them (Dagster names allow only letters, digits and underscores)"
        )
        return
    dg.Definitions.validate_loadable(build_definitions(config))


def test_the_docs_list_every_option_and_variable() -> None:
    text = (REPO / "docs" / "dagster.md").read_text()
    for name, field in BuildOptions.model_fields.items():
        row = re.search(rf"^\| `{name}` \| `([^`]*)` \|", text, re.MULTILINE)
        assert row is not None, name
        assert row[1].replace('"', "'") == repr(field.default) or row[1] == str(field.default), name
    for variable in BuildOptions.variables().values():
        assert f"| `{variable}` |" in text, variable
