"""Retention by bundle (issue 37 item 2): ``retention.prune.bundles`` on a dated archive.

The layout most producers use, a dated folder a day published to a ``preserve_relative``
archive, pruned through the installed ``distributor`` console script on a local root, an
OpenSSH SFTP root and a moto S3 prefix: the dry run lists which bundles go and which stay, the
apply removes whole bundle paths (outputs, ``.distributor.json``, empty folders), a delete that
fails mid-way leaves state recording exactly what is still there and the same command finishes
the job, and a later ``run`` does not publish the removed bundles again. Shared roots: only the
selected owner's bundle paths, the others' records and files untouched.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from distributor_core import paths as lp
from distributor_core.app.run import RunOptions, run_config
from distributor_core.bundle import build_manifest, write_manifest
from distributor_core.config import Environment, load_config
from distributor_core.state import BundleCandidate, BundlePolicy, parse_state_document, plan_bundle_retention
from distributor_core.storage.base import Storage
from distributor_core.storage.factory import open_destination_storage
from tests.cli.conftest import run_script
from tests.config.helpers import messages, one_pipeline
from tests.reliability.conftest import hook_env

DAYS = ["2026-06-01", "2026-06-02", "2026-06-03", "2026-06-04"]
FILES = {"report.md": "# {day}\n", "sub/summary.txt": "summary of {day}\n"}
NOW = datetime(2026, 6, 8, 12, 0, tzinfo=UTC)


def write_day(source: Path, day: str) -> None:
    bundle = source / day
    for rel, text in FILES.items():
        target = bundle / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.format(day=day))
    created = datetime.fromisoformat(day).replace(tzinfo=UTC)
    write_manifest(bundle, build_manifest(bundle, id="reports.daily", files=list(FILES), created=created))


# --------------------------------------------------------------------------- the pure plan


def candidate(path: str, day: int) -> BundleCandidate:
    return BundleCandidate(path, datetime(2026, 6, day, tzinfo=UTC), "reports.daily", f"sha256:{day}", 2)


def test_the_newest_bundles_by_manifest_created_are_kept_ties_by_path() -> None:
    bundles = [candidate("c", 3), candidate("a", 5), candidate("b", 5), candidate("d", 1)]
    verdicts = plan_bundle_retention(bundles, BundlePolicy(keep_latest=2), now=NOW)
    assert [(v.bundle_path, v.action) for v in verdicts] == [("a", "keep"), ("b", "keep"), ("c", "remove"),
                                                              ("d", "remove")]
    assert verdicts[2].reason == "not one of the newest 2 bundles (keep_latest)"


def test_older_than_removes_only_what_keep_latest_does_not_keep() -> None:
    bundles = [candidate(f"2026-06-0{day}", day) for day in range(1, 6)]
    policy = BundlePolicy(keep_latest=4, older_than=timedelta(hours=24 * 5))  # cutoff 2026-06-03T12:00
    verdicts = {v.bundle_path: v for v in plan_bundle_retention(bundles, policy, now=NOW)}
    assert [p for p, v in verdicts.items() if v.removed] == ["2026-06-01"]  # the fifth newest, and old
    assert verdicts["2026-06-02"].reason == "one of the newest 4 bundles (keep_latest)"  # old, but kept
    policy = BundlePolicy(keep_latest=1, older_than=timedelta(hours=24 * 5))
    verdicts = {v.bundle_path: v for v in plan_bundle_retention(bundles, policy, now=NOW)}
    assert sorted(p for p, v in verdicts.items() if v.removed) == ["2026-06-01", "2026-06-02", "2026-06-03"]
    assert verdicts["2026-06-01"].reason == "created before 2026-06-03T12:00:00Z (older_than 120h)"
    assert verdicts["2026-06-04"].reason == "created at or after 2026-06-03T12:00:00Z (older_than 120h)"


# --------------------------------------------------------------------------- the config key


@pytest.mark.parametrize(
    ("destination", "expected"),
    [
        ("retention: {prune: {enabled: true, bundles: {}}}", "bundles must set keep_latest or older_than"),
        ("retention: {prune: {enabled: true, bundles: {keep_latest: 0}}}", "bundles.keep_latest must be 1 or greater"),
        ("retention: {prune: {enabled: true, bundles: {older_than: 0s}}}",
         "bundles.older_than must be greater than zero"),
        ("retention: {prune: {enabled: true, keep_latest: 3, bundles: {keep_latest: 3}}}",
         "bundles cannot be combined with retention.prune.older_than or keep_latest"),
        ("path_mapping: {mode: fixed}, retention: {prune: {enabled: true, bundles: {keep_latest: 3}}}",
         "bundles needs path_mapping.mode preserve_relative"),
    ],
    ids=["empty", "keep-zero", "zero-age", "combined", "fixed"],
)
def test_bundle_retention_config_errors_name_the_key(destination: str, expected: str) -> None:
    (message,) = messages(one_pipeline(destination=f"{{id: a, backend: local, path: /a, {destination}}}"))
    assert message.startswith("pipelines[0].destinations[0].retention.prune.")
    assert expected in message


def test_bundle_retention_is_refused_for_upload_pipelines() -> None:
    text = ("upload_tokens: [{id: t, token_env: T, allow_pipelines: [reports]}]\n"
            + one_pipeline(source="{backend: http_upload}",
                           destination="{id: a, backend: local, path: /a, "
                                       "retention: {prune: {enabled: true, bundles: {keep_latest: 3}}}}"))
    (message,) = messages(text)
    assert "bundles is not supported for destinations of http_upload pipelines" in message


def test_max_partitions_must_be_positive() -> None:
    text = "pipelines: [{id: p, source: {backend: local, path: /s}, dagster: {max_partitions: 0}, " \
           "destinations: [{id: a, backend: local, path: /a}]}]\n"
    assert messages(text) == ["pipelines[0].dagster.max_partitions must be 1 or greater"]
    destination = one_pipeline(destination="{id: a, backend: local, path: /a, dagster: {max_partitions: 5}}")
    assert messages(destination) == ["pipelines[0].destinations[0].dagster.max_partitions: unknown field"]


# --------------------------------------------------------------------------- through the console script


@dataclass
class Archive:
    """A ``reports`` pipeline publishing dated bundles to the destination ``archive`` (local,
    SFTP or S3), whose retention the test rewrites."""

    directory: Path
    backend_yaml: str
    env: dict[str, str] = field(default_factory=dict)
    is_local: bool = False

    @property
    def config(self) -> Path:
        return self.directory / "distributor.yml"

    def write_config(self, bundles: str, *, extra_destinations: str = "") -> Path:
        self.config.write_text(
            "pipelines:\n"
            "  - id: reports\n"
            f"    source: {{backend: local, path: {self.directory / 'source'}}}\n"
            "    destinations:\n"
            "      - id: archive\n" + self.backend_yaml
            + f"        retention: {{prune: {{enabled: true, bundles: {bundles}}}}}\n" + extra_destinations
        )
        return self.config

    def storage(self) -> Storage:
        config = load_config(self.config)
        return open_destination_storage(config.destination("reports", "archive"), Environment(dict(self.env)))

    def tree(self) -> dict[str, str]:
        """Every file under the root (reserved names included), with its text."""
        with self.storage() as storage:
            entries = storage.walk("", include_reserved=True, include_dirs=False)
            return {e.path: storage.read_bytes(e.path).decode() for e in entries}

    def dirs(self) -> list[str]:
        with self.storage() as storage:
            return sorted(e.path for e in storage.walk("", include_reserved=True, include_dirs=True) if e.is_dir)

    def prune(self, *flags: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        return run_script("prune", "--config", str(self.config), "--pipeline", "reports", "--destination",
                          "archive", *flags, cwd=self.directory, env={**self.env, **(env or {})})


def local_archive(tmp_path: Path) -> Archive:
    return Archive(tmp_path, f"        backend: local\n        path: {tmp_path / 'out'}\n", is_local=True)


#: the backends an archive is tried on: a local root, an OpenSSH SFTP root, a moto S3 prefix
BACKENDS = ["local", pytest.param("ssh", marks=pytest.mark.sftp), pytest.param("s3", marks=pytest.mark.s3)]


def archive_on(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Archive:
    if backend == "local":
        return local_archive(tmp_path)
    if backend == "ssh":
        server = request.getfixturevalue("sshd_server")
        root = server.make_sftp_root()
        return Archive(tmp_path, (
            f"        backend: ssh\n        host: {server.host}\n        port: {server.port}\n"
            f"        user: {server.user}\n        path: {root}\n"
            f"        private_key_file: {server.client_key_path}\n"
            f"        known_hosts_file: {server.known_hosts_path}\n"))
    server = request.getfixturevalue("moto_server")
    bucket = server.create_bucket()
    return Archive(tmp_path, (
            f"        backend: s3\n        bucket: {bucket}\n        prefix: archive/{secrets.token_hex(3)}\n"
            f"        region: {server.region}\n        endpoint: {server.endpoint_url}\n"
            "        force_path_style: true\n"
            "        credentials: {access_key_id_env: PRUNE_KEY, secret_access_key_env: PRUNE_SECRET}\n"),
        env={"PRUNE_KEY": server.access_key_id, "PRUNE_SECRET": server.secret_access_key})


@pytest.fixture(params=BACKENDS)
def archive(request: pytest.FixtureRequest, tmp_path: Path) -> Archive:
    return archive_on(request.param, request, tmp_path)


def published(archive: Archive, days: list[str] = DAYS) -> dict[str, str]:
    """Publish every day (a policy keeping them all), then return the destination's files."""
    for day in days:
        write_day(archive.directory / "source", day)
    archive.write_config("{keep_latest: 10}")
    report = run_config(load_config(archive.config), RunOptions(), env=Environment(dict(archive.env)))
    assert report.ok, report.error_message()
    return archive.tree()


def outputs_of(day: str) -> dict[str, str]:
    return {f"{day}/{rel}": text.format(day=day) for rel, text in FILES.items()}


def test_a_dated_archive_keeps_the_newest_bundles_and_a_failed_delete_is_finished_by_a_retry(
        archive: Archive) -> None:
    before = published(archive)
    assert {p for p in before if p.endswith(lp.STATE_FILE_NAME)} == {f"{d}/{lp.STATE_FILE_NAME}" for d in DAYS}
    archive.write_config("{keep_latest: 2}")

    dry = archive.prune("--dry-run", "--format", "json")
    assert dry.returncode == 0, dry.stderr
    sections = {s["bundle_path"]: s for s in json.loads(dry.stdout)["result"]["bundles"]}
    assert {p: s["bundle_retention"]["action"] for p, s in sections.items()} == {
        "2026-06-01": "remove", "2026-06-02": "remove", "2026-06-03": "keep", "2026-06-04": "keep"}
    assert [o["path"] for o in sections["2026-06-01"]["planned_outputs"]] == ["report.md", "sub/summary.txt"]
    assert sections["2026-06-03"]["preserved_outputs"] and not sections["2026-06-03"]["planned_outputs"]
    assert archive.tree() == before  # a dry run changes nothing

    # the second output of the oldest bundle cannot be deleted: that bundle stops there, the next goes on
    failing = archive.prune("--apply", env=hook_env(DISTRIBUTOR_TEST_FAIL="delete:2026-06-01/sub/summary.txt"))
    assert failing.returncode == 1
    assert "Failed: bundle=2026-06-01 path=sub/summary.txt error=" in failing.stdout
    assert "1 bundle(s) failed: 2026-06-01:" in failing.stderr
    left = archive.tree()
    state = parse_state_document(left["2026-06-01/.distributor.json"].encode())
    assert [o.path for o in state.outputs] == ["sub/summary.txt"]  # state records exactly what is there
    assert "2026-06-01/report.md" not in left and "2026-06-01/sub/summary.txt" in left
    assert not any(p.startswith("2026-06-02") for p in left)  # the next bundle was removed whole
    assert not any(lp.basename(p).startswith(".distributor-") and not p.endswith(lp.STATE_FILE_NAME) for p in left)

    retry = archive.prune("--apply")
    assert retry.returncode == 0, retry.stdout + retry.stderr
    assert "bundle=2026-06-01 status=changed checked=1 planned=1 deleted=1" in retry.stdout
    kept = {p: t for p, t in before.items() if p.startswith(("2026-06-03", "2026-06-04"))}
    assert archive.tree() == kept
    if archive.is_local or archive.backend_yaml.lstrip().startswith("backend: ssh"):
        assert archive.dirs() == ["2026-06-03", "2026-06-03/sub", "2026-06-04", "2026-06-04/sub"]

    # a run of every bundle does not publish the removed ones again, and says so
    run = run_script("run", "--config", str(archive.config), cwd=archive.directory, env=archive.env)
    assert run.returncode == 0, run.stderr
    assert ("reports/archive: 2 bundle(s) of the source not published, outside retention.prune.bundles "
            "(keep_latest 2): 2026-06-01, 2026-06-02") in run.stderr
    assert "action=skip_same" in run.stdout and "publish_new" not in run.stdout
    assert archive.tree() == kept


def test_shared_root_removes_only_the_selected_owners_bundle_paths(archive: Archive) -> None:
    """Two destinations of one pipeline share a root (shared_root state); a third pipeline keeps a
    bundle path of its own there. Pruning ``archive`` by bundle removes archive's outputs and owner
    record from the old bundle paths and nothing of the others; once ``site`` prunes too, the old
    bundle paths end: no state, no folder."""
    work = archive.directory
    backend = archive.backend_yaml
    shared = "        state: {mode: shared_root}\n"
    archive.backend_yaml = backend + shared
    site = ("      - id: site\n" + backend + shared
            + "        publish: {source: false, html: true}\n        transform: {markdown_to_html: {enabled: true}}\n")
    environment = Environment(dict(archive.env))
    for day in DAYS[:3]:
        write_day(work / "source", day)
    archive.write_config("{keep_latest: 10}", extra_destinations=site)
    assert run_config(load_config(archive.config), RunOptions(), env=environment).ok
    write_day(work / "misc-source", "2026-05-01")
    other = work / "other.yml"
    other.write_text(f"pipelines:\n  - id: misc\n    source: {{backend: local, path: {work / 'misc-source'}}}\n"
                     f"    destinations:\n      - id: dump\n{backend}")
    assert run_config(load_config(other), RunOptions(), env=environment).ok  # single-owner state, the oldest
    before = archive.tree()

    archive.write_config("{keep_latest: 1}", extra_destinations=site)
    applied = archive.prune("--apply", "--format", "json")
    assert applied.returncode == 0, applied.stderr
    sections = {s["bundle_path"]: s for s in json.loads(applied.stdout)["result"]["bundles"]}
    assert set(sections) == set(DAYS[:3])  # 2026-05-01 is another owner's: not a candidate, not listed
    assert sections["2026-06-01"]["bundle_removed"] is True and sections["2026-06-01"]["state_removed"] is False
    after = archive.tree()
    gone = {f"{day}/{rel}" for day in DAYS[:2] for rel in FILES}
    assert set(after) == set(before) - gone
    assert all(after[p] == before[p] for p in after if not p.endswith(lp.STATE_FILE_NAME))
    old_state = parse_state_document(after[f"2026-06-01/{lp.STATE_FILE_NAME}"].encode())
    assert [o.scope.destination_id for o in old_state.owners] == ["site"]
    assert [o.path for o in old_state.outputs] == ["report.html"]
    assert after[f"2026-05-01/{lp.STATE_FILE_NAME}"] == before[f"2026-05-01/{lp.STATE_FILE_NAME}"]

    text = archive.config.read_text().replace(
        "transform: {markdown_to_html: {enabled: true}}\n",
        "transform: {markdown_to_html: {enabled: true}}\n        retention: {prune: {enabled: true, bundles: "
        "{keep_latest: 1}}}\n")
    archive.config.write_text(text)
    applied = run_script("prune", "--config", str(archive.config), "--pipeline", "reports", "--destination", "site",
                         "--apply", cwd=work, env=archive.env)
    assert applied.returncode == 0, applied.stderr
    # the old bundle paths ended
    assert {p.split("/")[0] for p in archive.tree()} == {"2026-05-01", "2026-06-03"}
    if not archive.backend_yaml.lstrip().startswith("backend: s3"):  # S3 has no folders
        assert {d.split("/")[0] for d in archive.dirs()} == {"2026-05-01", "2026-06-03"}
