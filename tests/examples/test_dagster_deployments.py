"""The container deployments of examples/dagster/ (docker/, kubernetes/) say what they do (issue 28):
the Docker instance file and the Helm values (whose ``concurrency`` block is turned on) carry the
pools and run limits of the one-host instance file, every process that writes or reads the S3
compute logs gets credentials, compose publishes the UI and the upload API on 127.0.0.1 only, and
the Docker example is one host.

Nothing here needs Docker, helm or a cluster. helm does not run on the test machine and the chart's
generated ``values.schema.json`` for 1.13 is not available offline, so the Helm values are checked
against :data:`CHART_SUBSCHEMA`, written for this test from the chart's documented value models
(dagster-io/dagster ``helm/dagster/schema/schema/charts/dagster/subschema/``: ``concurrency.py``,
``compute_log_manager.py``, ``daemon.py``), and :func:`chart_instance` restates what the chart's
instance templates write from those values (``_concurrency.tpl``, ``_run-coordinator.tpl``, the S3
compute log manager) so Dagster itself can load the result. tests/production/test_variants.py checks
the names the files share (secrets, volumes, mounts, variables)."""

from __future__ import annotations

import configparser
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DAGSTER_EXAMPLES = ROOT / "examples" / "dagster"
KUBERNETES = DAGSTER_EXAMPLES / "kubernetes"
DOCKER = DAGSTER_EXAMPLES / "docker"

_INT_OR_NULL = {"type": ["integer", "null"]}
_STRING = {"type": "string"}
_ENV_LIST = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": _STRING, "value": _STRING, "valueFrom": {"type": "object"}},
        "additionalProperties": False,
    },
}
_NAMED_LIST = {"type": "array", "items": {"type": "object", "required": ["name"]}}

#: The parts of the chart's values these examples set, with the keys and types the chart's value
#: models document (``extra="forbid"`` there: unknown keys are refused here too).
CHART_SUBSCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["concurrency", "computeLogManager", "dagsterDaemon", "dagsterWebserver", "runLauncher"],
    "properties": {
        "concurrency": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "enabled": {"type": "boolean"},
                "pools": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "defaultLimit": _INT_OR_NULL,
                        "granularity": {"enum": ["run", "op", None]},
                        "opGranularityRunBuffer": _INT_OR_NULL,
                    },
                },
                "runs": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "maxConcurrentRuns": _INT_OR_NULL,
                        "tagConcurrencyLimits": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["key", "limit"],
                                "properties": {
                                    "key": _STRING,
                                    "value": {"type": ["string", "object", "null"]},
                                    "limit": {"type": "integer"},
                                },
                            },
                        },
                    },
                },
            },
        },
        "computeLogManager": {
            "type": "object",
            "additionalProperties": False,
            "required": ["type", "config"],
            "properties": {
                "type": {"enum": ["NoOpComputeLogManager", "AzureBlobComputeLogManager", "GCSComputeLogManager",
                                  "S3ComputeLogManager", "CustomComputeLogManager"]},
                "config": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "s3ComputeLogManager": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["bucket"],
                            "properties": {
                                key: _STRING
                                for key in ("bucket", "prefix", "region", "localDir", "endpointUrl", "verifyCertPath")
                            }
                            | {key: {"type": "boolean"} for key in ("useSsl", "verify", "skipEmptyFiles",
                                                                   "showUrlOnly")}
                            | {"uploadInterval": {"type": "integer"}, "uploadExtraArgs": {"type": "object"}},
                        },
                    },
                },
            },
        },
        "dagsterDaemon": {
            "type": "object",
            "properties": {
                "env": _ENV_LIST,
                "envSecrets": _NAMED_LIST,
                "volumes": _NAMED_LIST,
                "volumeMounts": _NAMED_LIST,
                "sensors": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["useThreads"],
                    "properties": {
                        "useThreads": {"type": "boolean"},
                        "numWorkers": _INT_OR_NULL,
                        "numSubmitWorkers": _INT_OR_NULL,
                    },
                },
                "runCoordinator": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["enabled", "type", "config"],
                    "properties": {
                        "enabled": {"type": "boolean"},
                        "type": {"enum": ["QueuedRunCoordinator", "CustomRunCoordinator"]},
                        "config": {
                            "type": "object",
                            "properties": {
                                "queuedRunCoordinator": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "properties": {
                                        "maxConcurrentRuns": _INT_OR_NULL,
                                        "tagConcurrencyLimits": {"type": ["array", "null"]},
                                        "dequeueIntervalSeconds": _INT_OR_NULL,
                                        "dequeueNumWorkers": _INT_OR_NULL,
                                        "dequeueUseThreads": {"type": ["boolean", "null"]},
                                        "blockOpConcurrencyLimitedRuns": {"type": ["object", "null"]},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
        "dagsterWebserver": {
            "type": "object",
            "properties": {
                "env": _ENV_LIST,
                "envSecrets": _NAMED_LIST,
                "volumes": _NAMED_LIST,
                "volumeMounts": _NAMED_LIST,
            },
        },
        "runLauncher": {
            "type": "object",
            "required": ["type"],
            "properties": {"type": {"enum": ["CeleryK8sRunLauncher", "K8sRunLauncher", "CustomRunLauncher"]}},
        },
    },
}

_S3_KEYS = {
    "bucket": "bucket", "prefix": "prefix", "region": "region", "localDir": "local_dir",
    "endpointUrl": "endpoint_url", "verifyCertPath": "verify_cert_path", "useSsl": "use_ssl", "verify": "verify",
    "skipEmptyFiles": "skip_empty_files", "showUrlOnly": "show_url_only", "uploadInterval": "upload_interval",
    "uploadExtraArgs": "upload_extra_args",
}


def chart_instance(values: dict[str, Any]) -> dict[str, Any]:
    """The ``run_coordinator``, ``concurrency`` and ``compute_logs`` sections of the dagster.yaml
    the chart writes from ``values`` (restated from its instance templates, for the keys used
    here). Without ``concurrency.enabled`` the chart writes no ``concurrency`` block, and an
    unset ``maxConcurrentRuns`` of the queued run coordinator becomes ``-1`` (unlimited)."""
    concurrency = values.get("concurrency") or {}
    enabled = bool(concurrency.get("enabled"))
    queued = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    coordinator: dict[str, Any] = {}
    if not enabled or queued.get("maxConcurrentRuns") is not None:
        coordinator["max_concurrent_runs"] = queued.get("maxConcurrentRuns", -1)
    if queued.get("tagConcurrencyLimits"):
        coordinator["tag_concurrency_limits"] = queued["tagConcurrencyLimits"]
    if queued.get("dequeueIntervalSeconds"):
        coordinator["dequeue_interval_seconds"] = queued["dequeueIntervalSeconds"]
    instance: dict[str, Any] = {
        "run_coordinator": {"module": "dagster.core.run_coordinator", "class": "QueuedRunCoordinator",
                            "config": coordinator},
    }
    sensors = values["dagsterDaemon"].get("sensors") or {}
    if sensors:
        instance["sensors"] = {
            snake: sensors[camel]
            for camel, snake in (("useThreads", "use_threads"), ("numWorkers", "num_workers"),
                                 ("numSubmitWorkers", "num_submit_workers"))
            if sensors.get(camel) is not None
        }
    if enabled:
        pools, runs = concurrency.get("pools") or {}, concurrency.get("runs") or {}
        block: dict[str, Any] = {}
        rendered_pools = {
            snake: pools[camel]
            for camel, snake in (("defaultLimit", "default_limit"), ("granularity", "granularity"),
                                 ("opGranularityRunBuffer", "op_granularity_run_buffer"))
            if pools.get(camel) is not None
        }
        if rendered_pools:
            block["pools"] = rendered_pools
        rendered_runs: dict[str, Any] = {}
        if runs.get("maxConcurrentRuns") is not None:
            rendered_runs["max_concurrent_runs"] = runs["maxConcurrentRuns"]
        if runs.get("tagConcurrencyLimits"):
            rendered_runs["tag_concurrency_limits"] = [
                {"key": t["key"], **({"value": t["value"]} if t.get("value") else {}), "limit": t["limit"]}
                for t in runs["tagConcurrencyLimits"]
            ]
        if rendered_runs:
            block["runs"] = rendered_runs
        instance["concurrency"] = block
    manager = values["computeLogManager"]
    if manager["type"] == "S3ComputeLogManager":
        config = manager["config"]["s3ComputeLogManager"]
        instance["compute_logs"] = {
            "module": "dagster_aws.s3.compute_log_manager",
            "class": "S3ComputeLogManager",
            "config": {_S3_KEYS[key]: value for key, value in config.items()},
        }
    return instance


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    return yaml.safe_load((KUBERNETES / "values.yaml").read_text())


def _resources() -> dict[tuple[str, str], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((KUBERNETES / "resources.yaml").read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


# ------------------------------------------------------------------------------ Kubernetes


def test_helm_values_use_only_keys_the_chart_documents(values: dict[str, Any]) -> None:
    errors = sorted(jsonschema.Draft202012Validator(CHART_SUBSCHEMA).iter_errors(values), key=str)
    assert errors == [], [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]


def _one_host() -> dict[str, Any]:
    return yaml.safe_load((DAGSTER_EXAMPLES / "dagster.yaml").read_text())


def test_helm_values_enable_the_concurrency_block(values: dict[str, Any]) -> None:
    concurrency = values["concurrency"]
    assert concurrency["enabled"] is True  # the chart's default (false) writes no pools and no tag limit
    granularity = _one_host()["concurrency"]["pools"]["granularity"]
    assert concurrency["pools"] == {"defaultLimit": 1, "granularity": granularity}
    assert concurrency["runs"]["maxConcurrentRuns"] == 10
    assert concurrency["runs"]["tagConcurrencyLimits"] == [
        {"key": "distributor/pipeline", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
    ]
    # the chart fails to render when the run coordinator sets a limit `concurrency` sets too
    queued = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert not {"maxConcurrentRuns", "tagConcurrencyLimits", "blockOpConcurrencyLimitedRuns"} & set(queued)


def test_the_chart_instance_has_the_one_host_limits(values: dict[str, Any]) -> None:
    """The run queue and pool settings the chart writes are those of examples/dagster/dagster.yaml."""
    one_host = _one_host()
    rendered = chart_instance(values)
    assert rendered["concurrency"] == one_host["concurrency"]
    assert rendered["run_coordinator"] == one_host["run_coordinator"]
    assert rendered["sensors"] == one_host["sensors"] == {"use_threads": True, "num_workers": 4}
    # what the values said before issue 28: no block, and an unlimited run coordinator
    disabled = chart_instance({**values, "concurrency": {**values["concurrency"], "enabled": False}})
    assert "concurrency" not in disabled and disabled["run_coordinator"]["config"]["max_concurrent_runs"] == -1


@pytest.mark.dagster
def test_dagster_loads_the_chart_instance_settings(values: dict[str, Any]) -> None:
    """Dagster 1.13 accepts the sections the chart writes (SQLite storage stands in for
    PostgreSQL) and reads the limits from them; the S3 compute log manager is built offline."""
    import dagster as dg

    with dg.instance_for_test(overrides=chart_instance(values)) as instance:
        config = instance.get_concurrency_config()
        assert type(instance.compute_log_manager).__name__ == "S3ComputeLogManager"
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert config.pool_config.default_pool_limit == 1
    assert config.pool_config.pool_granularity.value == _one_host()["concurrency"]["pools"]["granularity"]
    assert config.run_queue_config.max_concurrent_runs == 10
    assert config.run_queue_config.tag_concurrency_limits == [
        {"key": "distributor/pipeline", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
    ]


def _credentials_file(component: dict[str, Any], secret_name: str) -> str:
    """The ``AWS_SHARED_CREDENTIALS_FILE`` of a pod spec's values, checked to lie on a read-only
    mount of the Secret ``secret_name``."""
    env = {e["name"]: e.get("value") for e in component.get("env", [])}
    path = env["AWS_SHARED_CREDENTIALS_FILE"]
    volumes = {v["name"]: v for v in component.get("volumes", [])}
    mounted = [
        m for m in component.get("volumeMounts", [])
        if volumes.get(m["name"], {}).get("secret", {}).get("secretName") == secret_name
    ]
    assert len(mounted) == 1, f"no mount of the Secret {secret_name}"
    assert mounted[0].get("readOnly") is True
    directory, _, key = path.rpartition("/")
    assert directory == mounted[0]["mountPath"]
    return key


def test_every_process_touching_compute_logs_gets_the_credentials(values: dict[str, Any]) -> None:
    """Step logs (run pods), sensor tick logs (code server), backfill logs (daemon) are written to
    S3 and read by the webserver for the UI: each of them mounts the credentials file."""
    assert values["computeLogManager"]["type"] == "S3ComputeLogManager"
    assert values["computeLogManager"]["config"]["s3ComputeLogManager"]["bucket"]
    resources = _resources()
    secret = resources[("Secret", "distributor-compute-logs")]
    [deployment] = values["dagster-user-deployments"]["deployments"]
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}  # run pods get the code server's
    keys = {
        name: _credentials_file(component, "distributor-compute-logs")
        for name, component in (("code server and runs", deployment), ("webserver", values["dagsterWebserver"]),
                                ("daemon", values["dagsterDaemon"]))
    }
    assert set(keys.values()) == {"credentials"}, keys
    parser = configparser.ConfigParser()
    parser.read_string(secret["stringData"]["credentials"])
    assert {"aws_access_key_id", "aws_secret_access_key"} <= set(parser["default"])
    # the webserver gets the compute-log credentials and nothing of the distributor's secrets
    assert not values["dagsterWebserver"].get("envSecrets")


# ---------------------------------------------------------------------------------- Docker


def _published(service: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(host address, host port, container port) of each published port (short or long syntax)."""
    out = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            out.append((str(port.get("host_ip", "")), str(port.get("published", "")), str(port["target"])))
            continue
        parts = str(port).split(":")
        if len(parts) == 3:
            out.append((parts[0], parts[1], parts[2]))
        elif len(parts) == 2:
            out.append(("", parts[0], parts[1]))
        else:
            out.append(("", "", parts[0]))
    return out


def test_compose_publishes_on_loopback_only() -> None:
    compose = yaml.safe_load((DOCKER / "docker-compose.yml").read_text())
    services = compose["services"]
    published = {name: _published(service) for name, service in services.items() if service.get("ports")}
    assert published == {
        "webserver": [("127.0.0.1", "3000", "3000")],  # the UI: no authentication of its own
        "serve": [("127.0.0.1", "8080", "8080")],  # the upload API
    }
    assert not any(service.get("network_mode") == "host" for service in services.values())
    # inside its container serve listens on every interface, or the published port would reach nothing
    distributor = yaml.safe_load((DOCKER / "distributor.yml").read_text())
    assert distributor["server"]["http"]["bind"] == "0.0.0.0:8080"


def test_the_docker_instance_has_the_one_host_limits() -> None:
    docker = yaml.safe_load((DOCKER / "dagster.yaml").read_text())
    one_host = _one_host()
    assert docker["concurrency"] == one_host["concurrency"]
    assert docker["run_coordinator"] == one_host["run_coordinator"]
    assert docker["sensors"] == one_host["sensors"]


def test_the_docker_example_is_one_host() -> None:
    instance = yaml.safe_load((DOCKER / "dagster.yaml").read_text())
    assert instance["run_launcher"]["class"] == "DockerRunLauncher"
    for name in ("dagster.yaml", "docker-compose.yml"):
        assert "one Docker host" in (DOCKER / name).read_text(), name
    docs = (ROOT / "docs" / "dagster.md").read_text()
    section = docs[docs.index("### Containers: Docker on one host, Kubernetes across machines"):]
    section = section[: section.index("\n### ", 1)]
    docker = section[section.index("**Docker: one host**"):]
    assert "all on one Docker host" in docker[: docker.index("\n\n")]
