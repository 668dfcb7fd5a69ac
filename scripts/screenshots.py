#!/usr/bin/env python3
"""Regenerate the Dagster UI screenshots of docs/dagster.md from a real ``dagster dev``.

    .venv/bin/python scripts/screenshots.py            # writes docs/images/dagster-*.png

What it does, as a data team would: start ``dagster dev -w workspace.yaml`` on 127.0.0.1 with
``DISTRIBUTOR_CONFIG=examples/fan-out.yml`` and a throwaway ``DAGSTER_HOME`` (the outputs land in
``demo-output/fan-out/``, which it empties first), click Materialize on the pipeline's destination
assets (the same GraphQL call the button sends: both destination assets and their checks), wait
for the run, then take PNG screenshots with headless Chromium (Debian's ``chromium``) of

- ``dagster-asset-graph.png``: the pipeline's asset group, the source feeding both destinations;
- ``dagster-asset-page.png``: the ``source_archive`` asset page (latest materialization, check
  results, description and storage URI with the absolute root);
- ``dagster-asset-event.png``: its materialization event (metadata, data version = bundle digest,
  code version);
- ``dagster-asset-checks.png``: its Checks tab (three checks evaluated in the run, the blocking one).

Chromium runs through playwright-core (npm, installed into a temporary directory on first use,
``executablePath=/usr/bin/chromium``), because the UI is a single-page app that keeps polling:
a plain ``chromium --headless --screenshot`` either never settles under ``--virtual-time-budget``
or captures the loading spinner. Options: ``--chromium PATH``, ``--out DIR``, ``--keep`` (leave
``dagster dev`` running and print its URL).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CONFIG = REPO / "examples" / "fan-out.yml"
OUTPUT = REPO / "demo-output" / "fan-out"
GROUP = "example_fan_out"
ASSETS = [[GROUP, "source_archive"], [GROUP, "html_site"]]
CHECKS = ("state_valid", "managed_outputs_present", "no_unmanaged_content")
PLAYWRIGHT = "playwright-core@1.49.1"

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchPipelineExecution(executionParams: $params) {
    __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  }
}"""

SHOOT_JS = r"""
const { chromium } = require('playwright-core');
(async () => {
  const [executablePath, shots] = [process.argv[2], JSON.parse(process.argv[3])];
  const browser = await chromium.launch({
    executablePath, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
           '--disable-sync', '--no-first-run'],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 800 } });
  for (const shot of shots) {
    await page.goto(shot.url, { waitUntil: 'networkidle', timeout: 120000 }).catch(() => {});
    // The asset live data (events, check results) arrives after the page: wait for its text.
    await page.getByText(shot.waitFor, { exact: false }).first().waitFor({ timeout: 120000 });
    if (shot.click) {
      await page.getByText(shot.click, { exact: false }).first().click();
    }
    if (shot.scrollTo) {
      const target = page.getByText(shot.scrollTo, { exact: true }).first();
      await target.waitFor({ timeout: 30000 });
      await target.evaluate((el) => el.scrollIntoView({ block: 'center' }));
    }
    await page.waitForTimeout(shot.settle || 2000);
    await page.screenshot({ path: shot.path });
    console.log('wrote ' + shot.path);
  }
  await browser.close();
})().catch((error) => { console.error(error); process.exit(1); });
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"{url}/graphql", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.load(response)
    if answer.get("errors"):
        raise SystemExit(f"screenshots: GraphQL errors: {answer['errors']}")
    return answer["data"]


def wait_loaded(url: str, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    query = "{ workspaceOrError { ... on Workspace { locationEntries { loadStatus } } } }"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"screenshots: dagster dev exited {proc.returncode}")
        try:
            entries = graphql(url, query)["workspaceOrError"]["locationEntries"]
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                return
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit("screenshots: the code location did not load")


def materialize(url: str) -> str:
    """What Materialize on the destination assets sends (assets plus their checks); the run id."""
    params = {
        "selector": {
            "repositoryLocationName": "distributor",
            "repositoryName": "__repository__",
            "pipelineName": "__ASSET_JOB",
            "assetSelection": [{"path": key} for key in ASSETS],
            "assetCheckSelection": [{"assetKey": {"path": key}, "name": name} for key in ASSETS for name in CHECKS],
        },
        "mode": "default",
        "runConfigData": {},
    }
    result = graphql(url, LAUNCH, {"params": params})["launchPipelineExecution"]
    if result["__typename"] != "LaunchRunSuccess":
        raise SystemExit(f"screenshots: launch refused: {result}")
    run_id = result["run"]["runId"]
    deadline = time.monotonic() + 600
    status = ""
    while time.monotonic() < deadline:
        status = graphql(url, "query R($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", {"id": run_id})[
            "runOrError"
        ]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(2)
    if status != "SUCCESS":
        raise SystemExit(f"screenshots: run {run_id} ended {status or 'never'}")
    return run_id


def playwright_dir(cache: Path) -> Path:
    """A directory with playwright-core installed (npm, no browser download)."""
    if not (cache / "node_modules" / "playwright-core").is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(cache), PLAYWRIGHT],
            check=True,
            env={**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"},
        )
    return cache


def shoot(chromium: str, shots: list[dict], cache: Path) -> None:
    directory = playwright_dir(cache)
    script = directory / "shoot.js"
    script.write_text(SHOOT_JS)
    subprocess.run(["node", str(script), chromium, json.dumps(shots)], check=True, cwd=directory)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    parser.add_argument("--keep", action="store_true", help="leave dagster dev running")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="distributor-screenshots-"))
    home = work / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    shutil.rmtree(OUTPUT, ignore_errors=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DAGSTER_HOME": str(home), "DISTRIBUTOR_CONFIG": str(CONFIG)}
    log = open(work / "dagster-dev.log", "wb")  # noqa: SIM115 - the child's log for the whole run
    proc = subprocess.Popen(
        [str(BIN / "dagster"), "dev", "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_loaded(url, proc)
        run_id = materialize(url)
        print(f"materialized {', '.join('/'.join(k) for k in ASSETS)} in run {run_id}")
        # Dagster's "Join the community" dialog would cover every shot: mark it seen, as its Skip does.
        graphql(url, "mutation { setNuxSeen }")
        args.out.mkdir(parents=True, exist_ok=True)
        asset = f"{url}/assets/{GROUP}/source_archive"
        shots = [
            # the source (dashed: observable) feeding both destinations, each Materialized, checks 3/3
            {
                "url": f"{url}/asset-groups/{GROUP}/lineage",
                "path": str(args.out / "dagster-asset-graph.png"),
                "waitFor": "Materialized",
            },
            # latest materialization, latest check results, description with the absolute root, storage URI
            {"url": asset, "path": str(args.out / "dagster-asset-page.png"), "waitFor": "Latest check results"},
            # the materialization event: its metadata and the data_version / code_version tags
            {
                "url": f"{asset}?view=events",
                "path": str(args.out / "dagster-asset-event.png"),
                "waitFor": "Materialized in run",
                "click": "Show tags",
                "scrollTo": "data_version",
            },
            {"url": f"{asset}?view=checks", "path": str(args.out / "dagster-asset-checks.png"), "waitFor": "Succeeded"},
        ]
        shoot(args.chromium, shots, Path(tempfile.gettempdir()) / "distributor-playwright")
        if args.keep:
            print(f"dagster dev keeps running at {url} (DAGSTER_HOME={home}); stop it with: kill -- -{proc.pid}")
            return 0
    finally:
        if not args.keep:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
