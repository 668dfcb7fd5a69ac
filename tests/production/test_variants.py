"""The multi-machine variants in examples/dagster/docker and examples/dagster/kubernetes, checked
as far as this machine allows (no Docker engine, no Kubernetes, no helm): the Docker instance
file loads with dagster-docker against the real PostgreSQL; the distributor config each variant
mounts builds a code location; and every name one file relies on is defined by the file that
should define it (env variables, mounts, secrets, the shared data volume). Nothing here starts a
container or renders the Helm chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster._core.workspace.config_schema import ensure_workspace_config

from distributor_core.config import load_config
from distributor_dagster import build_definitions
from tests.peers.daemon import REPO, make_dagster_home
from tests.production.harness import Deployment

pytestmark = pytest.mark.dagster

DOCKER = REPO / "examples" / "dagster" / "docker"
KUBERNETES = REPO / "examples" / "dagster" / "kubernetes"
SHARED = "/opt/dagster/shared"


def _under(path: str, mounts: list[str]) -> bool:
    return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts)


def _code_location(config_path: Path) -> dg.Definitions:
    defs = build_definitions(config_path)
    dg.Definitions.validate_loadable(defs)
    return defs


# ---------------------------------------------------------------------------------- Docker


def test_docker_instance_loads_with_the_docker_run_launcher(deployment: Deployment, tmp_path: Path) -> None:
    text = (DOCKER / "dagster.yaml").read_text()
    assert text.count(f"base_dir: {SHARED}") == 2
    # the shared volume's path is this test's directory (loading creates the compute log dir)
    relocated = tmp_path / "instance.yaml"
    relocated.write_text(text.replace(f"base_dir: {SHARED}", f"base_dir: {tmp_path / 'shared'}"))
    home = make_dagster_home(tmp_path / "docker-home", relocated)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        launcher = instance.run_launcher
        assert type(launcher).__name__ == "DockerRunLauncher"
        assert type(instance.compute_log_manager).__name__ == "LocalComputeLogManager"
        assert instance.get_concurrency_config().pool_config.pool_granularity.value == "op"
        env_vars, volumes = set(launcher.env_vars), launcher.container_kwargs["volumes"]
    assert launcher.networks == ["distributor"]
    assert {"DISTRIBUTOR_CONFIG", *deployment.postgres.environment("x")} <= env_vars

    compose = yaml.safe_load((DOCKER / "docker-compose.yml").read_text())
    services = compose["services"]
    # every run container gets what the services have: variables, mounts, the network
    for name in ("code", "webserver", "daemon", "serve"):
        service = services[name]
        assert env_vars <= set(service["environment"]), name
        assert set(volumes) <= set(service["volumes"]), name
    assert compose["networks"]["default"]["name"] == "distributor"
    named = {v.split(":")[0] for v in volumes if not v.startswith("/")}
    assert {compose["volumes"][key]["name"] for key in named} == named  # no project-name prefix
    assert services["code"]["environment"]["DAGSTER_CURRENT_IMAGE"] == services["code"]["image"]
    assert "/var/run/docker.sock:/var/run/docker.sock" in services["daemon"]["volumes"]

    # the distributor config the containers mount: loads, and what runs and serve share is on a
    # mount every run container has
    config_in_container = services["serve"]["environment"]["DISTRIBUTOR_CONFIG"]
    assert config_in_container == "/etc/distributor/distributor.yml"
    assert _under(config_in_container, [v.split(":")[1] for v in volumes])
    config = load_config(DOCKER / "distributor.yml")
    mounts = [v.split(":")[1] for v in volumes if ":ro" not in v]
    assert _under(str(config.server.http.staging_root), mounts)
    for pipeline in config.pipelines:
        for destination in pipeline.destinations:
            assert _under(destination.storage.root_path, mounts)
        for upload in (t.token_env for t in config.upload_tokens):
            assert upload in env_vars
    _code_location(DOCKER / "distributor.yml")
    workspace = yaml.safe_load((DOCKER / "workspace.yaml").read_text())
    ensure_workspace_config(workspace, str(DOCKER / "workspace.yaml"))
    assert workspace["load_from"][0]["grpc_server"]["host"] == "code"
    dockerfile = (DOCKER / "Dockerfile").read_text()
    assert "'.[postgres,docker,k8s]'" in dockerfile and "examples/dagster/docker/dagster.yaml" in dockerfile


# ------------------------------------------------------------------------------ Kubernetes


def _documents() -> dict[tuple[str, str], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((KUBERNETES / "resources.yaml").read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_kubernetes_values_and_resources_agree(tmp_path: Path) -> None:
    values = yaml.safe_load((KUBERNETES / "values.yaml").read_text())
    resources = _documents()
    [deployment] = values["dagster-user-deployments"]["deployments"]
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}  # run pods inherit the rest
    assert deployment["codeServerArgs"] == ["-m", "distributor_dagster.definitions"]
    env = {e["name"]: e["value"] for e in deployment["env"]}
    mounts = {m["name"]: m["mountPath"] for m in deployment["volumeMounts"]}
    volumes = {v["name"]: v for v in deployment["volumes"]}
    assert set(mounts) == set(volumes)

    # the config: a ConfigMap mounted where DISTRIBUTOR_CONFIG points, loadable
    config_map = resources[("ConfigMap", volumes["distributor-config"]["configMap"]["name"])]
    config_path = Path(env["DISTRIBUTOR_CONFIG"])
    assert str(config_path.parent) == mounts["distributor-config"]
    (tmp_path / config_path.name).write_text(config_map["data"][config_path.name])
    config = load_config(tmp_path / config_path.name)
    _code_location(tmp_path / config_path.name)

    # uploads are staged in S3, so the run pods need no volume for them; the data volume (one
    # ReadWriteMany claim) holds the local destinations the run pods publish to
    store = config.server.http.staging_store
    assert store is not None and all(p.source.shared for p in config.upload_pipelines)  # type: ignore[union-attr]
    claim = resources[("PersistentVolumeClaim", volumes["distributor-data"]["persistentVolumeClaim"]["claimName"])]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    data = mounts["distributor-data"]
    for pipeline in config.pipelines:
        for destination in pipeline.destinations:
            assert _under(destination.storage.root_path, [data])

    # the secrets the config names (tokens, the staging bucket's credentials) are in the Secret the
    # code server (and so every run) gets
    [secret_ref] = deployment["envSecrets"]
    secret = resources[("Secret", secret_ref["name"])]
    assert {t.token_env for t in config.upload_tokens} <= set(secret["stringData"])
    assert store.credentials is not None
    assert {store.credentials.access_key_id_env, store.credentials.secret_access_key_env} <= set(secret["stringData"])
    for ref in values["runLauncher"]["config"]["k8sRunLauncher"]["envSecrets"]:
        assert ("Secret", ref["name"]) in resources

    # serve: two or more replicas on the same config (S3 staging: no lock, no shared disk) and
    # Dagster instance, the staging credentials from the same Secret, a private scratch directory
    serve = resources[("Deployment", "distributor-serve")]["spec"]
    assert serve["replicas"] >= 2 and serve["strategy"]["type"] == "RollingUpdate"
    budget = resources[("PodDisruptionBudget", "distributor-serve")]["spec"]
    assert budget["minAvailable"] >= 1 and budget["selector"] == serve["selector"]
    pod = serve["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"][-2:] == ["--publisher", "dagster"]
    assert [ref["secretRef"]["name"] for ref in container["envFrom"]] == [secret_ref["name"]]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    serve_mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert serve_mounts["distributor-config"] == mounts["distributor-config"]
    assert "distributor-data" not in serve_mounts
    serve_volumes = {v["name"]: v for v in pod["volumes"]}
    assert serve_mounts["scratch"] == "/tmp" and serve_volumes["scratch"] == {"name": "scratch", "emptyDir": {}}
    assert serve_volumes["dagster-instance"]["configMap"]["name"] == "dagster-instance"
    serve_env = {e["name"]: e for e in container["env"]}
    assert serve_env["DAGSTER_HOME"]["value"] == serve_mounts["dagster-instance"]
    password = serve_env["DAGSTER_PG_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert ("Secret", password["name"]) in resources and password["key"] == "postgresql-password"

    # the instance the chart writes: PostgreSQL over psycopg2, the queue limits and pools
    postgresql = values["postgresql"]
    assert postgresql["enabled"] is False and postgresql["postgresqlScheme"] == "postgresql+psycopg2"
    assert values["generatePostgresqlPasswordSecret"] is False
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["type"] == "QueuedRunCoordinator"
    assert coordinator["config"]["queuedRunCoordinator"] == {"dequeueIntervalSeconds": 1}  # no limits there
    assert values["concurrency"]["pools"] == {"defaultLimit": 1, "granularity": "op"}
    assert values["concurrency"]["runs"]["tagConcurrencyLimits"] == [
        {"key": "distributor/pipeline", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
    ]
