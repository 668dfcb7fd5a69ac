#!/usr/bin/env python3
"""Regenerate the Dagster UI screenshots of docs/dagster.md from a real ``dagster dev``.

    .venv/bin/python scripts/screenshots.py            # writes docs/images/dagster-*.png

What it does, as a data team would, in a throwaway work directory (source, config, outputs and
``DAGSTER_HOME`` all inside it): a source of dated bundle folders ``2026-06-07/`` and
``2026-06-08/`` (each a ``report.md`` and its manifest) and a config ``distributor.yml`` with one
pipeline ``reports.daily`` publishing to ``archive`` (``preserve_relative``: partitioned by
bundle), ``latest`` (``fixed``: unpartitioned, fed by the ``newest`` view) and ``site`` (Markdown
rendered to HTML, partitioned). It starts ``dagster dev -w workspace.yaml`` on 127.0.0.1 with
``DISTRIBUTOR_CONFIG`` pointing at that config, then:

1. runs one tick of the watch sensor ``watch_reports_daily`` in-process against the instance and
   applies it as the daemon would (partitions added, observations stored; its run requests are
   not launched), then launches the job ``publish_reports_daily`` over GraphQL (every bundle);
2. re-issues ``2026-06-07`` (new text, ``created`` one hour later, still older than
   ``2026-06-08``) and ticks again: partition ``2026-06-07`` of ``archive`` and ``site`` is stale;
3. adds a corrupt ``2026-06-09`` (a file changed after its manifest was written, same size), ticks,
   and materializes ``archive`` and ``site`` for partition ``2026-06-09`` (what the UI's
   Materialize sends): the source check ``bundle_valid`` fails for that partition only;

and takes PNG screenshots with headless Chromium (Debian's ``chromium``) of

- ``dagster-asset-graph.png``: the pipeline's lineage: source, newest view, three destinations;
- ``dagster-partitions.png``: the Partitions tab of ``reports_daily/archive``;
- ``dagster-stale-partition.png``: the archive's stale partition ``2026-06-07``;
- ``dagster-asset-event.png``: a partition's materialization event (data version = bundle digest);
- ``dagster-asset-checks.png``: the archive's Checks tab (checks per partition);
- ``dagster-source-check.png``: the source check ``bundle_valid`` failing for ``2026-06-09``;
- ``dagster-latest.png``: the fixed destination ``reports_daily/latest`` (the newest bundle).

Chromium runs through playwright-core (npm, installed into a temporary directory on first use,
``executablePath=/usr/bin/chromium``), because the UI is a single-page app that keeps polling:
a plain ``chromium --headless --screenshot`` either never settles under ``--virtual-time-budget``
or captures the loading spinner. Options: ``--chromium PATH``, ``--out DIR``, ``--keep`` (leave
``dagster dev`` running and print its URL and work directory).
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
import textwrap
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PIPELINE = "reports.daily"
GROUP = "reports_daily"
SOURCE = [GROUP]
ARCHIVE = [GROUP, "archive"]
LATEST = [GROUP, "latest"]
SITE = [GROUP, "site"]
JOB = "publish_reports_daily"
SENSOR = "watch_reports_daily"
CHECKS = ("state_valid", "managed_outputs_present", "no_unmanaged_content")
DAYS = ["2026-06-07", "2026-06-08", "2026-06-09"]
FIRST = datetime(2026, 6, 7, 6, 0, 0, tzinfo=UTC)
PLAYWRIGHT = "playwright-core@1.49.1"
CONFIG = """\
pipelines:
  - id: reports.daily
    source: {backend: local, path: source}
    destinations:
      - {id: archive, backend: local, path: out/archive}
      - id: latest
        backend: local
        path: out/latest
        path_mapping: {mode: fixed}
      - id: site
        backend: local
        path: out/site
        publish: {source: false, html: true}
        transform: {markdown_to_html: {enabled: true}}
"""
#: the instance of ``dagster dev`` (runs queued and started by its daemon), without telemetry
INSTANCE_YAML = "telemetry:\n  enabled: false\n"

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchPipelineExecution(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""
RUN_STATUS = "query R($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"

SHOOT_JS = r"""
const { chromium } = require('playwright-core');
(async () => {
  const [executablePath, shots] = [process.argv[2], JSON.parse(process.argv[3])];
  const browser = await chromium.launch({
    executablePath, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
           '--disable-sync', '--no-first-run'],
  });
  for (const shot of shots) {
    const page = await browser.newPage({ viewport: { width: 1400, height: shot.height || 800 } });
    await page.goto(shot.url, { waitUntil: 'networkidle', timeout: 120000 }).catch(() => {});
    // The asset live data (events, partitions, check results) arrives after the page: wait for its text.
    for (const text of [].concat(shot.waitFor || [])) {
      await page.getByText(text, { exact: false }).first().waitFor({ timeout: 120000 });
    }
    for (const text of shot.click || []) {
      await page.getByText(text, { exact: true }).first().click();
      await page.waitForTimeout(1500);
    }
    for (const text of [].concat(shot.waitAfter || [])) {
      await page.getByText(text, { exact: false }).first().waitFor({ timeout: 120000 });
    }
    if (shot.scrollTo) {
      const target = page.getByText(shot.scrollTo, { exact: true }).first();
      await target.waitFor({ timeout: 30000 });
      await target.evaluate((el) => el.scrollIntoView({ block: 'center' }));
    }
    await page.waitForTimeout(shot.settle || 2500);
    await page.screenshot({ path: shot.path, fullPage: false });
    console.log('wrote ' + shot.path);
    await page.close();
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


def wait_loaded(url: str, proc: subprocess.Popen[bytes], timeout: float = 600) -> None:
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


def bundle(source: Path, day: str, text: str, *, hours: int = 0) -> Path:
    """A dated bundle folder with one ``report.md`` and its manifest (``created`` on its day)."""
    from distributor_core.bundle import build_manifest, write_manifest

    directory = source / day
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "report.md").write_text(f"# Daily report {day}\n\n{text}\n", encoding="utf-8")
    created = FIRST + timedelta(days=DAYS.index(day), hours=hours)
    manifest = build_manifest(directory, id=PIPELINE, files=["report.md"], created=created)
    write_manifest(directory, manifest, overwrite=True)
    return directory


def sensor_tick(work: Path, home: Path) -> None:
    """One tick of the watch sensor against the instance of ``dagster dev``, applied as the daemon
    applies it (partitions added, observations and check evaluations stored). Its run requests are
    not launched: the script launches its runs itself."""
    import dagster as dg

    from distributor_dagster.location import definitions_from_environment

    defs = definitions_from_environment({"DISTRIBUTOR_CONFIG": str(work / "distributor.yml")})
    sensor = defs.resolve_sensor_def(SENSOR)
    cursor_file = work / "sensor-cursor"
    cursor = cursor_file.read_text() if cursor_file.exists() else None
    with dg.DagsterInstance.from_config(str(home)) as instance:
        tick = sensor(dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs))
        for request in tick.dynamic_partitions_requests or []:
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        for event in tick.asset_events:
            instance.report_runless_asset_event(event)
    cursor_file.write_text(tick.cursor or "")
    print(f"tick of {SENSOR}: {len(tick.asset_events)} asset event(s), {len(tick.run_requests)} run request(s)")


def launch(url: str, *, job: str | None = None, assets: list[list[str]] = (), partition: str | None = None) -> str:
    """Launch the job ``job`` (everything) or, as the UI's Materialize does, the selected assets
    and their checks (of one partition); wait for the run; its id."""
    selector: dict = {"repositoryLocationName": "distributor", "repositoryName": "__repository__",
                      "pipelineName": job or "__ASSET_JOB"}
    if job is None:
        selector["assetSelection"] = [{"path": key} for key in assets]
        selector["assetCheckSelection"] = [
            {"assetKey": {"path": key}, "name": name} for key in assets for name in CHECKS
        ]
    params: dict = {"selector": selector, "mode": "default", "runConfigData": {}}
    if partition is not None:
        params["executionMetadata"] = {"tags": [{"key": "dagster/partition", "value": partition}]}
    result = graphql(url, LAUNCH, {"params": params})["launchPipelineExecution"]
    if result["__typename"] != "LaunchRunSuccess":
        raise SystemExit(f"screenshots: launch refused: {result}")
    run_id = result["run"]["runId"]
    deadline = time.monotonic() + 900
    status = ""
    while time.monotonic() < deadline:
        status = graphql(url, RUN_STATUS, {"id": run_id})["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(2)
    if status != "SUCCESS":
        raise SystemExit(f"screenshots: run {run_id} ended {status or 'never'}")
    what = job or "Materialize " + ", ".join("/".join(key) for key in assets)
    print(f"{what}{f' [{partition}]' if partition else ''}: run {run_id} {status}")
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


def scenario(url: str, work: Path, home: Path) -> None:
    source = work / "source"
    sensor_tick(work, home)  # the two bundles become partitions, each observed with its digest
    launch(url, job=JOB)  # publishes every bundle to every destination
    bundle(source, DAYS[0], "Corrected figures.", hours=1)  # re-issued, still older than 2026-06-08
    sensor_tick(work, home)  # partition 2026-06-07 observed with its new digest: stale downstream
    corrupt = bundle(source, DAYS[2], "third issue")
    (corrupt / "report.md").write_text(f"# Daily report {DAYS[2]}\n\nTHIRD ISSUE\n", encoding="utf-8")
    sensor_tick(work, home)
    launch(url, assets=[ARCHIVE, SITE], partition=DAYS[2])  # bundle_valid fails for 2026-06-09


def shots_for(url: str, out: Path) -> list[dict]:
    assets = f"{url}/assets"
    archive = f"{assets}/{'/'.join(ARCHIVE)}"
    return [
        {"url": f"{url}/asset-groups/{GROUP}/lineage", "path": str(out / "dagster-asset-graph.png"),
         "waitFor": "Materialized"},
        {"url": f"{archive}?view=partitions", "path": str(out / "dagster-partitions.png"), "waitFor": DAYS[0]},
        {"url": f"{archive}?view=events", "path": str(out / "dagster-asset-event.png"), "waitFor": "Materialized"},
        {"url": f"{archive}?view=checks", "path": str(out / "dagster-asset-checks.png"), "waitFor": "state_valid"},
        {"url": f"{assets}/{'/'.join(SOURCE)}?view=checks", "path": str(out / "dagster-source-check.png"),
         "waitFor": "bundle_valid"},
        {"url": f"{assets}/{'/'.join(LATEST)}", "path": str(out / "dagster-latest.png"), "waitFor": "Materialized"},
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    parser.add_argument("--keep", action="store_true", help="leave dagster dev running")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))  # distributor_core / distributor_dagster from this checkout

    work = Path(tempfile.mkdtemp(prefix="distributor-screenshots-"))
    home = work / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    for day in DAYS[:2]:
        bundle(work / "source", day, "First issue.")
    config = work / "distributor.yml"
    config.write_text(textwrap.dedent(CONFIG), encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DAGSTER_HOME": str(home), "DISTRIBUTOR_CONFIG": str(config)}
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
        # Dagster's "Join the community" dialog would cover every shot: mark it seen, as its Skip does.
        graphql(url, "mutation { setNuxSeen }")
        scenario(url, work, home)
        if args.keep:
            print(f"dagster dev keeps running at {url} (work dir {work}); stop it with: kill -- -{proc.pid}")
            return 0
        args.out.mkdir(parents=True, exist_ok=True)
        shoot(args.chromium, shots_for(url, args.out), Path(tempfile.gettempdir()) / "distributor-playwright")
    finally:
        if not args.keep:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
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
