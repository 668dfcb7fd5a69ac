"""A real ``dagster-webserver`` on 127.0.0.1 (test peer) and a small client of its GraphQL API.

``running_webserver`` starts ``dagster-webserver -w <workspace>`` in its own process group (its
code server and the run workers the default run launcher starts live in that group), waits until
the code location has loaded, and stops the group by its id at the end. ``Webserver.graphql``
posts one query and fails the test on GraphQL errors; ``launch`` and ``wait_run`` send what the
UI's Materialize and "Execute checks" buttons send.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.peers.process import free_port

BIN = Path(sys.executable).parent
READY_TIMEOUT = 180.0
RUN_TIMEOUT = 300.0
#: What the UI launches for assets of a code location: the implicit asset job of its repository.
ASSET_JOB = "__ASSET_JOB"
REPOSITORY = "__repository__"
#: Instance settings for a webserver without a daemon: runs launch at once (no run queue).
INSTANCE_YAML = """\
telemetry:
  enabled: false
run_coordinator:
  module: dagster.core.run_coordinator
  class: DefaultRunCoordinator
"""
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}

LOCATION_STATUS = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"
LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchPipelineExecution(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
RUN_STATUS = "query Run($id: ID!) { runOrError(runId: $id) { ... on Run { status stepKeysToExecute } } }"


@dataclass
class Webserver:
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    location: str

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        response = httpx.post(f"{self.url}/graphql", json={"query": query, "variables": dict(variables or {})},
                              timeout=120)
        response.raise_for_status()
        body = response.json()
        if body.get("errors"):
            raise AssertionError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    def launch(self, assets: Sequence[Sequence[str]], checks: Sequence[tuple[Sequence[str], str]] = (),
               run_config: Mapping[str, Any] | None = None, *, partition: str | None = None,
               job: str = ASSET_JOB) -> str:
        """Launch a run of the selected assets and checks (of one partition), as the UI does, or of a
        whole job (empty selections with ``job``); the run id."""
        selector: dict[str, Any] = {
            "repositoryLocationName": self.location,
            "repositoryName": REPOSITORY,
            "pipelineName": job,
        }
        if job == ASSET_JOB:
            selector["assetSelection"] = [{"path": list(key)} for key in assets]
            selector["assetCheckSelection"] = [
                {"assetKey": {"path": list(key)}, "name": name} for key, name in checks
            ]
        params: dict[str, Any] = {"selector": selector, "mode": "default", "runConfigData": dict(run_config or {})}
        if partition is not None:
            params["executionMetadata"] = {"tags": [{"key": "dagster/partition", "value": partition}]}
        result = self.graphql(LAUNCH, {"params": params})["launchPipelineExecution"]
        if result["__typename"] != "LaunchRunSuccess":
            raise AssertionError(f"launch refused: {result}")
        return result["run"]["runId"]

    def wait_run(self, run_id: str) -> dict[str, Any]:
        """Poll until the run finished; its status and step keys."""
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            run = self.graphql(RUN_STATUS, {"id": run_id})["runOrError"]
            if run.get("status") in FINISHED:
                return run
            if time.monotonic() > deadline:
                pytest.fail(f"run {run_id} did not finish within {RUN_TIMEOUT:.0f} s: {run}", pytrace=False)
            time.sleep(1)

    def wait_loaded(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"dagster-webserver exited {self.proc.returncode}:\n{self.log_text()}", pytrace=False)
            try:
                entries = self.graphql(LOCATION_STATUS)["workspaceOrError"]["locationEntries"]
                if entries and all(entry["loadStatus"] == "LOADED" for entry in entries):
                    return
            except (httpx.HTTPError, KeyError, TypeError, ValueError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the code location did not load within {READY_TIMEOUT:.0f} s:\n{self.log_text()}",
                            pytrace=False)
            time.sleep(1)


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the webserver, then SIGKILL to the process group it leads (code server, runs)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait(timeout=10)


@contextmanager
def running_webserver(
    workspace: Path, home: Path, env: Mapping[str, str], log_path: Path, *, location: str = "distributor"
) -> Iterator[Webserver]:
    """``dagster-webserver -w workspace`` on a free port with ``DAGSTER_HOME=home`` and ``env``."""
    port = free_port()
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [str(BIN / "dagster-webserver"), "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            env={**os.environ, **env, "DAGSTER_HOME": str(home)},
        )
    server = Webserver(url=f"http://127.0.0.1:{port}", proc=proc, log_path=log_path, location=location)
    try:
        server.wait_loaded()
        yield server
    finally:
        stop_group(proc)
