#!/usr/bin/env python3
"""Regenerate the Dagster UI screenshots of docs/dagster.md from a real ``dagster dev``.

    .venv/bin/python scripts/screenshots.py            # writes docs/images/dagster-*.png

What it does, as a data team would, in a throwaway work directory (``$TMPDIR/distributor-screenshots``,
emptied first; source, config, outputs and ``DAGSTER_HOME`` all inside it): a source of dated
bundle folders ``2026-06-07/`` and ``2026-06-08/`` (each a ``report.md`` and its manifest) and a
config ``distributor.yml`` with one pipeline ``reports.daily`` publishing to ``archive``
(``preserve_relative``: partitioned by bundle), ``latest`` (``fixed``: unpartitioned, fed by the
``newest`` view) and ``site`` (Markdown rendered to HTML, partitioned). It starts ``dagster dev -w
workspace.yaml`` on 127.0.0.1 with ``DISTRIBUTOR_CONFIG`` pointing at that config, then:

1. runs one tick of the watch sensor ``watch_reports_daily`` in-process against the instance and
   applies it as the daemon would (partitions added, observations stored; its run requests are
   not launched), then launches the job ``publish_reports_daily`` over GraphQL (every bundle);
2. re-issues ``2026-06-07`` (new text, ``created`` one hour later, still older than
   ``2026-06-08``) and ticks again: partition ``2026-06-07`` of ``archive`` and ``site`` is stale;
   the shot of ``latest`` is taken here (it holds the newest bundle, ``2026-06-08``);
3. adds a corrupt ``2026-06-09`` (a file changed after its manifest was written, same size), ticks,
   and materializes ``archive`` and ``site`` for partition ``2026-06-09`` (what the UI's
   Materialize sends): the source check ``bundle_valid`` fails for that partition only;
4. adds ``2026-06-10`` and ``2026-06-11``, ticks, publishes every bundle, then runs the ``prune``
   job with ``apply: true``: ``archive`` and ``site`` keep their two newest bundles
   (``retention.prune.bundles``), ``2026-06-07`` and ``2026-06-08`` stop being their partitions,
   the source (which still holds them) keeps its own;

and takes PNG screenshots with headless Chromium (Debian's ``chromium``) of

- ``dagster-asset-graph.png``: the group's lineage at the end: source, newest view, three destinations;
- ``dagster-partitions.png``: the Partitions tab of ``reports_daily/archive``, ``2026-06-07`` selected
  (Materialized, Unsynced);
- ``dagster-stale-partition.png``: the same, with the cause of its "Unsynced" opened;
- ``dagster-asset-event.png``: the archive's newest materialization event (metadata; tags with
  ``data_version`` = ``source_digest``);
- ``dagster-asset-checks.png``: the archive's Checks tab, the blocking check per partition;
- ``dagster-source-check.png``: the source check ``bundle_valid`` failing for ``2026-06-09`` (file and
  both digests);
- ``dagster-shaped-asset.png``: the archive's overview with what the config's ``dagster:`` blocks
  gave it (description, owners of the pipeline and of the destination, tags, the ``file`` kind);
- ``dagster-latest.png``: the fixed destination ``reports_daily/latest`` after step 2 (holding
  ``2026-06-08``, the newest bundle);
- ``dagster-partitions-after-prune.png``: the Partitions tab of ``reports_daily/archive`` after
  step 4 (the bundles it holds, and ``2026-06-09``, never published);
- ``dagster-source-partitions-after-prune.png``: the source's Partitions tab at the same moment;
- ``dagster-prune-events.png``: the archive's Events tab: the prune's observations of the bundles
  it removed (their partitions ended, their history stays);
- ``dagster-launchpad.png``: the launchpad of ``publish_reports_daily``: the run settings once,
  ``resources.publish.config`` with their defaults, for both of its graphs (issue 37).

Chromium runs through playwright-core (npm, installed into a temporary directory on first use,
``executablePath=/usr/bin/chromium``), because the UI is a single-page app that keeps polling:
a plain ``chromium --headless --screenshot`` either never settles under ``--virtual-time-budget``
or captures the loading spinner. Options: ``--chromium PATH``, ``--out DIR``, ``--work DIR``, ``--keep``
(leave ``dagster dev`` running and print its URL and work directory).
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
import urllib.parse
import urllib.request
import warnings
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
DAYS = ["2026-06-07", "2026-06-08", "2026-06-09", "2026-06-10", "2026-06-11"]
FIRST = datetime(2026, 6, 7, 6, 0, 0, tzinfo=UTC)
PLAYWRIGHT = "playwright-core@1.49.1"
CONFIG = """\
pipelines:
  - id: reports.daily
    source: {backend: local, path: source}
    dagster:
      owners: [team:analytics]
      tags: {domain: finance}
    destinations:
      - id: archive
        backend: local
        path: out/archive
        retention: {prune: {enabled: true, bundles: {keep_latest: 2}}}
        dagster:
          owners: [archive-oncall@example.com]
          tags: {audience: auditors}
          description: Every daily report as published, one folder per day (read by auditors)
      - id: latest
        backend: local
        path: out/latest
        path_mapping: {mode: fixed}
      - id: site
        backend: local
        path: out/site
        publish: {source: false, html: true}
        transform: {markdown_to_html: {enabled: true}}
        retention: {prune: {enabled: true, bundles: {keep_latest: 2}}}
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
  const find = (page, step) => {
    // the UI keeps hidden copies of some labels (to measure them): only visible ones are clickable
    const found = page.getByText(step.text, { exact: step.exact !== false }).and(page.locator(':visible'));
    return step.last ? found.last() : found.nth(step.nth || 0);
  };
  for (const shot of shots) {
    const page = await browser.newPage({ viewport: { width: 1400, height: shot.height || 800 } });
    await page.goto(shot.url, { waitUntil: 'networkidle', timeout: 120000 }).catch(() => {});
    // The asset live data (events, partitions, check results) arrives after the page: wait for its text.
    for (const text of shot.waitFor || []) {
      await page.getByText(text, { exact: false }).first().waitFor({ timeout: 120000 });
    }
    for (const step of shot.click || []) {
      await find(page, step).click({ timeout: 60000 });
      await page.waitForTimeout(1500);
    }
    for (const text of shot.waitAfter || []) {
      await page.getByText(text, { exact: false }).first().waitFor({ timeout: 120000 });
    }
    await page.waitForTimeout(shot.settle || 2500);
    await page.screenshot({ path: shot.path });
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

    with warnings.catch_warnings():  # Dagster's preview warnings at load (the code location logs them)
        warnings.simplefilter("ignore")
        defs = definitions_from_environment({"DISTRIBUTOR_CONFIG": str(work / "distributor.yml")})
    sensor = defs.resolve_sensor_def(SENSOR)
    cursor_file = work / "sensor-cursor"
    cursor = cursor_file.read_text() if cursor_file.exists() else None
    with dg.DagsterInstance.from_config(str(home)) as instance:
        tick = sensor(dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs))
        for event in tick.asset_events:
            instance.report_runless_asset_event(event)
        for request in tick.dynamic_partitions_requests or []:
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
            else:
                for key in request.partition_keys:
                    instance.delete_dynamic_partition(request.partitions_def_name, key)
    cursor_file.write_text(tick.cursor or "")
    print(f"tick of {SENSOR}: {len(tick.asset_events)} asset event(s), {len(tick.run_requests)} run request(s)")


def launch(url: str, *, job: str | None = None, assets: list[list[str]] = (), partition: str | None = None,
           run_config: dict | None = None) -> str:
    """Launch the job ``job`` (everything) or, as the UI's Materialize does, the selected assets
    and their checks (of one partition); wait for the run; its id."""
    selector: dict = {"repositoryLocationName": "distributor", "repositoryName": "__repository__",
                      "pipelineName": job or "__ASSET_JOB"}
    if job is None:
        selector["assetSelection"] = [{"path": key} for key in assets]
        selector["assetCheckSelection"] = [
            {"assetKey": {"path": key}, "name": name} for key in assets for name in CHECKS
        ]
    params: dict = {"selector": selector, "mode": "default", "runConfigData": run_config or {}}
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


def page(url: str, key: list[str], view: str = "", **params: str) -> str:
    """The UI page of asset ``key`` (its tab ``view``: partitions, events, checks)."""
    query = urllib.parse.urlencode(({"view": view} if view else {}) | params)
    return f"{url}/assets/{'/'.join(key)}" + (f"?{query}" if query else "")


def publish_and_reissue(url: str, work: Path, home: Path, out: Path) -> list[dict]:
    """Steps 1 and 2; the shots of that moment (the fixed destination holds the newest bundle)."""
    sensor_tick(work, home)  # the two bundles become partitions, each observed with its digest
    launch(url, job=JOB)  # publishes every bundle to every destination
    bundle(work / "source", DAYS[0], "Corrected figures.", hours=1)  # re-issued, still older than 2026-06-08
    sensor_tick(work, home)  # partition 2026-06-07 observed with its new digest: stale downstream
    return [
        # the fixed destination: unpartitioned, materialized with the newest bundle (2026-06-08), checks 3/3
        {"url": page(url, LATEST), "path": str(out / "dagster-latest.png"), "height": 1350,
         "waitFor": ["Latest check results", "publish_new"]},
        # the job's launchpad: the run settings scaffolded once, with their defaults
        {"url": f"{url}/locations/distributor/jobs/{JOB}/playground", "path": str(out / "dagster-launchpad.png"),
         "height": 700, "waitFor": ["dry_run", "republish"]},
    ]


def corrupt_bundle(url: str, work: Path, home: Path, out: Path) -> list[dict]:
    """Step 3; the shots of the end state."""
    report = bundle(work / "source", DAYS[2], "Third issue.") / "report.md"
    report.write_text(report.read_text(encoding="utf-8").upper(), encoding="utf-8")  # other bytes, same size
    sensor_tick(work, home)
    launch(url, assets=[ARCHIVE, SITE], partition=DAYS[2])  # bundle_valid fails for 2026-06-09
    stale = {"url": page(url, ARCHIVE, "partitions", partition=DAYS[0]), "waitFor": ["Unsynced (1)", "publish_new"]}
    return [
        # the group's lineage: source (partitioned, observable), newest view, three destinations
        {"url": f"{url}/locations/distributor/asset-groups/{GROUP}/lineage",
         "path": str(out / "dagster-asset-graph.png"), "waitFor": ["Observed", "Materialized", "filled"]},
        # the archive's partitions, 2026-06-07 selected: materialized, unsynced (re-issued since)
        {**stale, "path": str(out / "dagster-partitions.png")},
        # the same partition with the cause of its "Unsynced" status opened
        {**stale, "path": str(out / "dagster-stale-partition.png"), "click": [{"text": "Unsynced (1)"}],
         "waitAfter": ["upstream data version change"]},
        # the newest materialization event of the archive: metadata, and data_version = source_digest in its tags
        # (navigation hidden, so that the digests fit)
        {"url": page(url, ARCHIVE, "events"), "path": str(out / "dagster-asset-event.png"), "height": 1400,
         "waitFor": ["materialized in run"],
         "click": [{"text": "Hide navigation"}, {"text": "Show tags", "exact": False}],
         "waitAfter": ["data_version_is_user_provided"]},
        # the archive's checks, per partition: the blocking check's partitions and one partition's result
        {"url": page(url, ARCHIVE, "checks"), "path": str(out / "dagster-asset-checks.png"), "height": 900,
         "waitFor": ["state_valid", "Latest execution"],
         "click": [{"text": "Partitions", "nth": 1}, {"text": DAYS[1], "last": True}], "waitAfter": ["checked_count"]},
        # the archive's overview as the team shaped it: description, owners, kinds, tags (the config's dagster blocks)
        {"url": page(url, ARCHIVE), "path": str(out / "dagster-shaped-asset.png"), "height": 1100,
         "waitFor": ["archive-oncall@example.com", "read by auditors"]},
        # the source check failing for the corrupt bundle, naming the file and both digests
        {"url": page(url, SOURCE, "checks"), "path": str(out / "dagster-source-check.png"), "height": 900,
         "waitFor": ["does not match manifest", "expected"]},
    ]


def prune_old_bundles(url: str, work: Path, home: Path, out: Path) -> list[dict]:
    """Step 4; the shots of the partitions after a prune."""
    for day in DAYS[3:]:
        bundle(work / "source", day, "Another issue.")
    sensor_tick(work, home)
    launch(url, job=JOB)  # the two new bundles (the corrupt one is left out)
    launch(url, job="prune", run_config={"ops": {"prune": {"config": {"apply": True}}}})
    return [
        # the archive holds its two newest bundles; 2026-06-09 (corrupt) was never published
        {"url": page(url, ARCHIVE, "partitions", partition=DAYS[4]),
         "path": str(out / "dagster-partitions-after-prune.png"), "waitFor": [DAYS[4], "publish_new"]},
        # what ended 2026-06-07 and 2026-06-08 stays in the archive's history: the prune's observations
        {"url": page(url, ARCHIVE, "events"), "path": str(out / "dagster-prune-events.png"), "height": 1000,
         "waitFor": [DAYS[0]], "click": [{"text": DAYS[0]}], "waitAfter": ["bundle_removed"], "settle": 4000},
        # the source still holds every bundle: its partitions are all there, observed
        {"url": page(url, SOURCE, "partitions"), "path": str(out / "dagster-source-partitions-after-prune.png"),
         "waitFor": [DAYS[0], DAYS[4]]},
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "distributor-screenshots",
                        help="throwaway work directory (emptied first; its path shows in the shots)")
    parser.add_argument("--keep", action="store_true", help="leave dagster dev running")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))  # distributor_core / distributor_dagster from this checkout

    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
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
    keep = False
    try:
        wait_loaded(url, proc)
        # Dagster's "Join the community" dialog would cover every shot: mark it seen, as its Skip does.
        graphql(url, "mutation { setNuxSeen }")
        args.out.mkdir(parents=True, exist_ok=True)
        cache = Path(tempfile.gettempdir()) / "distributor-playwright"
        shoot(args.chromium, publish_and_reissue(url, work, home, args.out), cache)
        shoot(args.chromium, corrupt_bundle(url, work, home, args.out), cache)
        shoot(args.chromium, prune_old_bundles(url, work, home, args.out), cache)
        if args.keep:
            print(f"dagster dev keeps running at {url} (work dir {work}); stop it with: kill -- -{proc.pid}")
            keep = True
    except BaseException:
        log.flush()
        print("screenshots: the end of dagster dev's log:", file=sys.stderr)
        print((work / "dagster-dev.log").read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        if not keep:
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
