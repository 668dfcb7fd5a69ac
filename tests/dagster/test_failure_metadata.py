"""Dagster failures an operator can act on (issue 25 item 1): for each failure class, the publish
job (executed in process) fails the step with one clear description and failure metadata naming
the absolute root (text), the offending paths (a table), the remedy (text) and the
troubleshooting entry (a URL). A corrupt bundle is the
source's problem (issue 24): its failed ``bundle_valid`` check carries the same facts."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from distributor_dagster import build_definitions
from tests.cli.conftest import run_script
from tests.cli.test_error_remedies import installed_link
from tests.dagster.conftest import events_of, make_bundle, write_config

pytestmark = pytest.mark.dagster

LOCAL = "      - {id: site, backend: local, path: out/site, path_mapping: {mode: fixed}}\n"


def _config(tmp_path: Path, destination: str, *, pipeline: str = "reports", name: str = "distributor.yml") -> Path:
    return write_config(
        tmp_path,
        f"pipelines:\n  - id: {pipeline}\n    source: {{backend: local, path: spool}}\n    destinations:\n"
        f"{destination}",
        name,
    )


def _spool(tmp_path: Path) -> None:
    make_bundle(tmp_path / "spool" / "daily", "reports.daily", {"report.md": "# Daily\n", "summary.txt": "ok\n"})


def _site(tmp_path: Path) -> str:
    return str(tmp_path / "out" / "site")


def _unmanaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _spool(tmp_path)
    (tmp_path / "out" / "site").mkdir(parents=True)
    (tmp_path / "out" / "site" / "index.html").write_text("hand-made\n")
    return _config(tmp_path, LOCAL)


def _foreign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _spool(tmp_path)
    other = _config(tmp_path, LOCAL, pipeline="other", name="other.yml")
    assert run_script("run", "--config", str(other)).returncode == 0
    return _config(tmp_path, LOCAL)


def _invalid_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _spool(tmp_path)
    (tmp_path / "out" / "site").mkdir(parents=True)
    (tmp_path / "out" / "site" / ".distributor.json").write_text("{not json")
    return _config(tmp_path, LOCAL)


def _s3(endpoint: str) -> str:
    return (
        "      - id: bucket\n        backend: s3\n        bucket: reports\n"
        f"        endpoint: {endpoint}\n        force_path_style: true\n"
        "        credentials: {access_key_id_env: DIST_T25D_KEY, secret_access_key_env: DIST_T25D_SECRET}\n"
    )


def _credential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _spool(tmp_path)
    monkeypatch.setenv("DIST_T25D_KEY", "key")
    monkeypatch.delenv("DIST_T25D_SECRET", raising=False)
    return _config(tmp_path, _s3("http://127.0.0.1:9"))  # never contacted


def _unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _spool(tmp_path)
    monkeypatch.setenv("DIST_T25D_KEY", "key")
    monkeypatch.setenv("DIST_T25D_SECRET", "secret")
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "port").write_text(str(port))
    return _config(tmp_path, _s3(f"http://127.0.0.1:{port}"))


@dataclass
class Case:
    failure: str
    setup: Callable[[Path, pytest.MonkeyPatch], Path]
    step: str
    root: Callable[[Path], str]
    paths: Callable[[Path], list[str]]
    remedy: tuple[str, ...]


CASES = [
    Case("unmanaged_content", _unmanaged, "reports.publish_site", _site, lambda t: [f"{_site(t)}/index.html"],
         ("--force", "force: true", "reconcile-state", "--adopt")),
    Case("foreign_owner", _foreign, "reports.publish_site", _site, lambda t: [f"{_site(t)}/.distributor.json"],
         ("other/site", "takeover.mode")),
    Case("invalid_state", _invalid_state, "reports.publish_site", _site,
         lambda t: [f"{_site(t)}/.distributor.json"], ("distributor inspect", "transfer.on_conflict: replace")),
    Case("missing_credential", _credential, "reports.discover", lambda t: "s3://reports at http://127.0.0.1:9",
         lambda t: [], ("export DIST_T25D_SECRET", "secrets.directory")),
    Case("unreachable_root", _unreachable, "reports.publish_bucket",
         lambda t: f"s3://reports at http://127.0.0.1:{(t / 'port').read_text()}", lambda t: [],
         ("`endpoint`",)),
]


def _run(config: Path) -> dg.ExecuteInProcessResult:
    job = build_definitions(config).resolve_job_def("publish_reports")
    return job.execute_in_process(raise_on_error=False)


@pytest.mark.parametrize("case", CASES, ids=[case.failure for case in CASES])
def test_step_failure_metadata_names_root_paths_remedy_and_docs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: Case
) -> None:
    config = case.setup(tmp_path, monkeypatch)
    root, paths = case.root(tmp_path), case.paths(tmp_path)
    result = _run(config)
    assert not result.success
    (failure,) = events_of(result, "STEP_FAILURE")
    assert failure.step_key == case.step
    data = failure.event_specific_data.user_failure_data
    assert data is not None, failure.event_specific_data.error
    # one clear description: the error, then root, paths, remedy and the link
    setup_failure = case.step.endswith(".discover")
    assert data.description.startswith("pipeline reports destination bucket: " if setup_failure else "bundle daily: ")
    assert f"(root {root}" in data.description
    for path in paths:
        assert path in data.description
    link = installed_link(case.failure)
    assert f"; more: distributor explain {case.failure})" in data.description
    metadata = data.metadata
    assert metadata["failure_class"].value == case.failure
    assert metadata["root"].value == root
    assert isinstance(metadata["paths"], dg.TableMetadataValue)
    rows = [row.data for row in metadata["paths"].records]
    assert rows == [{"class": case.failure, "root": root, "path": path} for path in (paths or [root])]
    assert metadata["path_count"].value == len(paths)
    for piece in case.remedy:
        assert piece in metadata["remedy"].value
    assert isinstance(metadata["docs_url"], dg.UrlMetadataValue)
    assert metadata["docs_url"].value == link
    assert metadata["explain"].value == f"distributor explain {case.failure}"
    if "`distributor " in metadata["remedy"].value:  # the code location's config, to run as printed
        assert f"--config {config} " in metadata["remedy"].value


def test_corrupt_bundle_check_names_root_paths_remedy_and_docs(tmp_path: Path) -> None:
    _spool(tmp_path)
    report = tmp_path / "spool" / "daily" / "report.md"
    report.write_text(report.read_text().upper())  # same size, other bytes
    result = _run(_config(tmp_path, LOCAL))
    # the source's problem: the bundle is left out and its check fails (issue 24 item 4)
    (failed,) = [e.event_specific_data for e in events_of(result, "ASSET_CHECK_EVALUATION")
                 if e.event_specific_data.check_name == "bundle_valid" and not e.event_specific_data.passed]
    metadata = failed.metadata
    root = str(tmp_path / "spool")
    assert metadata["failure_class"].value == "corrupt_bundle"
    assert metadata["root"].value == root
    assert [row.data["path"] for row in metadata["paths"].records] == [f"{root}/daily/report.md"]
    assert "distributor manifest create" in metadata["remedy"].value
    assert metadata["docs_url"].value == installed_link("corrupt_bundle")
    assert metadata["file"].value == "report.md"
    assert not (tmp_path / "out").exists()


MAINTENANCE = [
    # (job, run config of its step, how the destination is prepared, failure class, path, remedy piece)
    ("reconcile_state", {"bundle_path": "."}, "empty", "missing_state", ".distributor.json", "--all-bundles"),
    ("reconcile_state", {"bundle_path": ".", "adopt": True}, "other", "foreign_owner", ".distributor.json",
     "other/site"),
    ("audit", {"bundle_path": "."}, "invalid", "invalid_state", ".distributor.json", "distributor inspect"),
    ("audit", {}, "invalid", "invalid_state", ".distributor.json", "distributor inspect"),  # all bundle paths
    ("audit", {"bundle_path": "."}, "deleted", "audit_problems", "report.md", "--republish"),
]


@pytest.mark.parametrize(("job", "config", "prepare", "failure", "path", "remedy"), MAINTENANCE,
                         ids=[f"{m[0]}-{m[3]}-{'all' if not m[1] else 'root'}" for m in MAINTENANCE])
def test_maintenance_failure_metadata_names_root_path_remedy_and_docs(
    tmp_path: Path, job: str, config: dict, prepare: str, failure: str, path: str, remedy: str
) -> None:
    _spool(tmp_path)
    site = tmp_path / "out" / "site"
    site.mkdir(parents=True)
    if prepare == "other":
        other = _config(tmp_path, LOCAL, pipeline="other", name="other.yml")
        assert run_script("run", "--config", str(other)).returncode == 0
    elif prepare == "invalid":
        (site / ".distributor.json").write_text("{not json")
    elif prepare == "deleted":
        assert run_script("run", "--config", str(_config(tmp_path, LOCAL))).returncode == 0
        (site / "report.md").unlink()
    result = build_definitions(_config(tmp_path, LOCAL)).resolve_job_def(job).execute_in_process(
        run_config={"ops": {job: {"config": config}}}, raise_on_error=False)
    (failed,) = events_of(result, "STEP_FAILURE")
    data = failed.event_specific_data.user_failure_data
    link = installed_link(failure)
    metadata = data.metadata
    assert metadata["failure_class"].value == failure
    assert metadata["root"].value == str(site)
    assert [row.data["path"] for row in metadata["paths"].records] == [f"{site}/{path}"]
    assert remedy in metadata["remedy"].value
    assert metadata["docs_url"].value == link
    if config:  # one bundle path: the description carries the same facts
        assert f"(root {site}; paths (1): {site}/{path}; remedy: " in data.description
        assert data.description.endswith(f"; more: distributor explain {failure})")
