"""A production deployment on one host, as docs/dagster.md "Deploying" describes it: the shipped
``examples/dagster/dagster.yaml`` in a ``DAGSTER_HOME`` on a PostgreSQL database, a real
``dagster-daemon``, ``distributor serve --publisher dagster`` and ``dagster-webserver``, all
subprocesses sharing one environment, and the Dagster instance opened in the test to read run
records and events.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import httpx

from tests.peers.daemon import Daemon, Webserver
from tests.peers.postgres import PostgresServer
from tests.peers.process import stop_process

BIN = Path(sys.executable).parent
#: sensors tick as often as the daemon's sensor loop allows (it evaluates at most every 5 s)
SENSOR_INTERVAL = "1"
#: how long a test waits for the daemon to get a run through (queue, launch, execution)
RUN_TIMEOUT = 180.0
FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


@dataclass
class Deployment:
    """One host: a config file, a ``DAGSTER_HOME`` with the shipped instance file, and the
    environment every process of the deployment gets (``DAGSTER_PG_*``, ``DISTRIBUTOR_CONFIG``,
    sensor options, secrets)."""

    root: Path
    home: Path
    postgres: PostgresServer
    database: str
    env: dict[str, str] = field(default_factory=dict)
    _serve_log_start: int = 0

    @property
    def config_path(self) -> Path:
        return Path(self.env["DISTRIBUTOR_CONFIG"])

    def use_config(self, path: Path, secrets: Mapping[str, str] | None = None) -> None:
        self.env["DISTRIBUTOR_CONFIG"] = str(path)
        self.env.update(secrets or {})

    def write_config(self, doc: Mapping[str, Any], secrets: Mapping[str, str] | None = None) -> Path:
        path = self.root / "distributor.yml"
        path.write_text(json.dumps(doc, indent=2) + "\n")  # JSON is YAML
        self.use_config(path, secrets)
        return path

    @contextmanager
    def instance(self) -> Iterator[dg.DagsterInstance]:
        """The deployment's instance, as the webserver and the daemon open it."""
        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            yield instance

    @contextmanager
    def running(self, *, webserver: bool = False, serve: bool = False, daemon: bool = True) -> Iterator[Running]:
        """The deployment's processes, booted side by side: ``dagster-daemon`` (unless ``daemon``
        is false: nothing launches runs), optionally ``dagster-webserver`` and ``distributor serve
        --publisher dagster``; all stopped after."""
        stops: list[Callable[[], None]] = []
        try:
            peer = None
            if daemon:
                peer = Daemon.start(self.home, self.env, self.root / "daemon.log", cwd=self.root)
                stops.append(peer.stop)
            web = None
            if webserver:
                web = Webserver.start(self.home, self.env, self.root / "webserver.log", cwd=self.root)
                stops.append(web.stop)
            server = None
            if serve:
                server = self._start_serve()
                stops.append(lambda: stop_process(server))
            if peer is not None:
                peer.wait_ready()
            if web is not None:
                web.wait_ready()
            serve_url = self._wait_serve(server) if server is not None else ""
            yield Running(daemon=peer, web_url=web.url if web else "", serve_url=serve_url)
        finally:
            for stop in reversed(stops):
                stop()

    def _start_serve(self) -> subprocess.Popen[bytes]:
        log = open(self.root / "serve.log", "ab")  # noqa: SIM115 - kept open for the child
        self._serve_log_start = log.tell()  # a second start in one test appends to the same log
        try:
            return subprocess.Popen(
                [str(BIN / "distributor"), "serve", "--config", str(self.config_path), "--publisher", "dagster"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.root,
                env={**os.environ, **self.env, "DAGSTER_HOME": str(self.home)},
            )
        finally:
            log.close()

    def _wait_serve(self, proc: subprocess.Popen[bytes]) -> str:
        """The base URL ``distributor serve`` prints once it listens."""
        log_path = self.root / "serve.log"
        deadline = time.monotonic() + 60
        marker = "serving HTTP upload API on "
        while True:
            with open(log_path, "rb") as log:
                log.seek(self._serve_log_start)
                text = log.read().decode(errors="replace")
            if marker in text:
                return "http://" + text.split(marker, 1)[1].split()[0]
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"distributor serve did not start: {text[-3000:]}")
            time.sleep(0.1)


@dataclass(frozen=True)
class Running:
    """What :meth:`Deployment.running` started."""

    daemon: Daemon | None
    web_url: str
    serve_url: str


def wait_for(predicate: Callable[[], Any], *, timeout: float = RUN_TIMEOUT, message: str, poll: float = 0.5) -> Any:
    """Poll ``predicate`` until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {message}")
        time.sleep(poll)


def runs_tagged(instance: dg.DagsterInstance, **tags: str) -> list[dg.DagsterRun]:
    """Runs carrying every ``distributor/<key>`` tag given (``upload_run_id=...``), oldest first."""
    wanted = {f"distributor/{key}": value for key, value in tags.items()}
    return list(reversed(instance.get_runs(filters=dg.RunsFilter(tags=wanted))))


def wait_finished(instance: dg.DagsterInstance, run_ids: list[str], *, timeout: float = RUN_TIMEOUT) -> list[Any]:
    """The run records of ``run_ids`` once every one of them has finished."""

    def done() -> list[Any] | None:
        records = [instance.get_run_record_by_id(run_id) for run_id in run_ids]
        if all(r is not None and r.dagster_run.status in FINISHED for r in records):
            return records
        return None

    return wait_for(done, timeout=timeout, message=f"runs {run_ids} to finish")


@dataclass(frozen=True)
class Lifecycle:
    """When a run was enqueued, dequeued (STARTING), started, and finished, from its events."""

    run_id: str
    pipeline: str
    enqueued: float
    dequeued: float
    started: float
    finished: float
    #: (start, end) of each step, by step key
    steps: dict[str, tuple[float, float]]
    #: (event type, timestamp) of every event, in order
    timeline: tuple[tuple[str, float], ...]

    @property
    def nodes(self) -> set[str]:
        """The graph nodes that ran as steps (a step key inside the pipeline's graph-backed
        multi-asset is ``<p>.<node>``, e.g. ``site.execute_web``)."""
        return {key.rsplit(".", 1)[-1] for key in self.steps}

    def step(self, node: str) -> tuple[float, float]:
        """(start, end) of the step of graph node ``node`` (key ``<p>.<node>``)."""
        found = [span for key, span in self.steps.items() if key.rsplit(".", 1)[-1] == node]
        if len(found) != 1:
            raise AssertionError(f"run {self.run_id}: {len(found)} steps of node {node!r} in {sorted(self.steps)}")
        return found[0]


def lifecycle(instance: dg.DagsterInstance, run: dg.DagsterRun) -> Lifecycle:
    marks: dict[str, float] = {}
    step_start: dict[str, float] = {}
    steps: dict[str, tuple[float, float]] = {}
    timeline: list[tuple[str, float]] = []
    for entry in instance.all_logs(run.run_id):
        event = entry.dagster_event
        if event is None:
            continue
        kind = event.event_type_value
        timeline.append((kind, entry.timestamp))
        marks.setdefault(kind, entry.timestamp)
        if kind == "STEP_START" and event.step_key:
            step_start[event.step_key] = entry.timestamp
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE") and event.step_key in step_start:
            steps[event.step_key] = (step_start[event.step_key], entry.timestamp)
    finished = marks.get("PIPELINE_SUCCESS", marks.get("PIPELINE_FAILURE", marks.get("PIPELINE_CANCELED")))
    missing = [k for k in ("PIPELINE_ENQUEUED", "PIPELINE_STARTING", "PIPELINE_START") if k not in marks]
    if missing or finished is None:
        raise AssertionError(f"run {run.run_id} lacks {missing or 'an end event'}: {[k for k, _ in timeline]}")
    return Lifecycle(
        run_id=run.run_id,
        pipeline=run.tags.get("distributor/pipeline", ""),
        enqueued=marks["PIPELINE_ENQUEUED"],
        dequeued=marks["PIPELINE_STARTING"],
        started=marks["PIPELINE_START"],
        finished=finished,
        steps=steps,
        timeline=tuple(timeline),
    )


def sensor_ticks(instance: dg.DagsterInstance, sensor_name: str) -> list[Any]:
    """The recorded ticks of a sensor, oldest first."""
    states = [s for s in instance.all_instigator_state() if s.instigator_name == sensor_name]
    if not states:
        return []
    state = states[0]
    return list(reversed(instance.get_ticks(state.instigator_origin_id, state.selector_id)))


def wait_ticks_after(instance: dg.DagsterInstance, sensor_name: str, after: float, count: int = 2) -> list[Any]:
    """Wait for ``count`` finished ticks of the sensor that started after ``after``; those ticks."""

    def later() -> list[Any] | None:
        ticks = [t for t in sensor_ticks(instance, sensor_name)
                 if t.timestamp > after and t.status.value in ("SKIPPED", "SUCCESS", "FAILURE")]
        return ticks if len(ticks) >= count else None

    return wait_for(later, message=f"{count} ticks of {sensor_name}")


def graphql(url: str, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
    response = httpx.post(f"{url}/graphql", json={"query": query, "variables": dict(variables or {})}, timeout=60)
    response.raise_for_status()
    body = response.json()
    if body.get("errors"):
        raise AssertionError(f"GraphQL errors: {body['errors']}")
    return body["data"]


REEXECUTE_FROM_FAILURE = """
mutation Reexecute($parentRunId: String!) {
  launchRunReexecution(reexecutionParams: {parentRunId: $parentRunId, strategy: FROM_FAILURE}) {
    __typename
    ... on LaunchRunSuccess { run { runId status } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message }
    ... on RunConflict { message }
    ... on UnauthorizedError { message }
  }
}
"""


def reexecute_from_failure(url: str, parent_run_id: str) -> str:
    """What the UI's "Re-execute from failure" sends; the new run's id."""
    result = graphql(url, REEXECUTE_FROM_FAILURE, {"parentRunId": parent_run_id})["launchRunReexecution"]
    if result["__typename"] != "LaunchRunSuccess":
        raise AssertionError(f"re-execution of {parent_run_id} was refused: {result}")
    return result["run"]["runId"]
