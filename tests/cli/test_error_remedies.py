"""Errors an operator can act on (issue 25 item 1), through the real console script.

For each failure class, ``distributor run`` names the absolute root, the offending paths, the
remedy (the config key or command that resolves it, naming the config that was used, so it runs
as printed), the command that explains the class (``distributor explain <class>``) and the
troubleshooting entry installed with distributor: in the text report (a ``Refusal:`` line and the
stderr line) and in the JSON report (the action's ``refusal`` and the envelope's ``error``), and
the entry it links to exists in the docs.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from distributor_core.app.refusal import FAILURE_CLASSES
from tests.bundle.conftest import make_bundle
from tests.cli.conftest import REPO, run_script

TROUBLESHOOTING = (REPO / "docs" / "troubleshooting.md").read_text()
#: the troubleshooting page as installed with distributor (this environment's editable install)
INSTALLED_PAGE = (REPO / "distributor_core" / "docs" / "troubleshooting.md").as_uri()


def installed_link(failure: str) -> str:
    return f"{INSTALLED_PAGE}#{failure.replace('_', '-')}"


@dataclass
class Case:
    failure: str
    #: writes the config (and whatever the case needs) under tmp_path; returns (config, env)
    setup: Callable[[Path], tuple[Path, dict[str, str]]]
    #: the absolute root the refusal names (from tmp_path)
    root: Callable[[Path], str]
    #: absolute paths the refusal names (from tmp_path)
    paths: Callable[[Path], list[str]]
    #: a piece of the remedy line (the config key or command)
    remedy: tuple[str, ...]
    #: a setup failure: nothing is planned, the envelope carries the refusal
    setup_failure: bool = False


def _config(tmp_path: Path, destination: str, *, pipeline: str = "reports", name: str = "distributor.yml") -> Path:
    config = tmp_path / name
    config.write_text(
        "pipelines:\n"
        f"  - id: {pipeline}\n"
        "    source: {backend: local, path: spool}\n"
        "    destinations:\n"
        f"{destination}"
    )
    return config


LOCAL = "      - {id: site, backend: local, path: out/site, path_mapping: {mode: fixed}}\n"


def _spool(tmp_path: Path) -> None:
    make_bundle(tmp_path / "spool" / "daily")


def _unmanaged(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    _spool(tmp_path)
    site = tmp_path / "out" / "site"
    site.mkdir(parents=True)
    (site / "index.html").write_text("hand-made\n")
    (site / "notes.txt").write_text("mine\n")
    return _config(tmp_path, LOCAL), {}


def _foreign(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    _spool(tmp_path)
    other = _config(tmp_path, LOCAL, pipeline="other", name="other.yml")
    assert run_script("run", "--config", str(other)).returncode == 0
    return _config(tmp_path, LOCAL), {}


def _invalid_state(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    _spool(tmp_path)
    site = tmp_path / "out" / "site"
    site.mkdir(parents=True)
    (site / ".distributor.json").write_text("{not json")
    return _config(tmp_path, LOCAL), {}


def _corrupt(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    _spool(tmp_path)
    report = tmp_path / "spool" / "daily" / "report.md"
    report.write_bytes(report.read_bytes().upper())  # same size, other bytes
    return _config(tmp_path, LOCAL), {}


def _s3(endpoint: str) -> str:
    return (
        "      - id: bucket\n"
        "        backend: s3\n"
        "        bucket: reports\n"
        f"        endpoint: {endpoint}\n"
        "        force_path_style: true\n"
        "        credentials: {access_key_id_env: DIST_T25_KEY, secret_access_key_env: DIST_T25_SECRET}\n"
    )


def _credential(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    _spool(tmp_path)
    # never contacted: the credential is resolved before any destination is planned
    return _config(tmp_path, _s3("http://127.0.0.1:9")), {"DIST_T25_KEY": "key"}


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unreachable(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    _spool(tmp_path)
    port = _closed_port()
    (tmp_path / "port").write_text(str(port))
    return _config(tmp_path, _s3(f"http://127.0.0.1:{port}")), {"DIST_T25_KEY": "key", "DIST_T25_SECRET": "secret"}


def _conflict(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    _spool(tmp_path)
    config = _config(tmp_path, LOCAL)
    assert run_script("run", "--config", str(config)).returncode == 0
    # the producer changed the bundle without changing its created time
    (tmp_path / "spool" / "daily" / "manifest.json").unlink()
    make_bundle(tmp_path / "spool" / "daily", {"report.md": b"# Other\n"})
    return config, {}


def _no_source(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    return _config(tmp_path, LOCAL), {}


def _site(tmp_path: Path) -> str:
    return str(tmp_path / "out" / "site")


def _endpoint_root(tmp_path: Path) -> str:
    return f"s3://reports at http://127.0.0.1:{(tmp_path / 'port').read_text()}"


CASES = [
    Case("unmanaged_content", _unmanaged, _site,
         lambda t: [f"{_site(t)}/index.html", f"{_site(t)}/notes.txt"],
         ("--pipeline reports --destination site --force", "reconcile-state", "--adopt")),
    Case("foreign_owner", _foreign, _site, lambda t: [f"{_site(t)}/.distributor.json"],
         ("other/site", "takeover.mode: any_managed")),
    Case("invalid_state", _invalid_state, _site, lambda t: [f"{_site(t)}/.distributor.json"],
         ("distributor inspect ", "transfer.on_conflict: replace")),
    Case("corrupt_bundle", _corrupt, lambda t: str(t / "spool"), lambda t: [str(t / "spool" / "daily")],
         ("distributor manifest create", "`distributor validate --config ")),
    Case("missing_credential", _credential, lambda t: "s3://reports at http://127.0.0.1:9", lambda t: [],
         ("export DIST_T25_SECRET", "secrets.directory"), setup_failure=True),
    Case("unreachable_root", _unreachable, _endpoint_root, lambda t: [], ("`endpoint`", "run again")),
    Case("source_conflict", _conflict, _site, lambda t: [f"{_site(t)}/.distributor.json"],
         ("`created`", "--pipeline reports --destination site --force", "transfer.on_conflict: replace")),
    Case("missing_source_root", _no_source, lambda t: str(t / "spool"), lambda t: [], ("`source.path`",),
         setup_failure=True),
]


@pytest.mark.parametrize("case", CASES, ids=[case.failure for case in CASES])
def test_each_failure_names_root_paths_remedy_and_docs(tmp_path: Path, case: Case) -> None:
    config, env = case.setup(tmp_path)
    root, paths = case.root(tmp_path), case.paths(tmp_path)
    anchor = case.failure.replace("_", "-")
    link = installed_link(case.failure)
    assert f'<a id="{anchor}"></a>' in TROUBLESHOOTING

    text = run_script("run", "--config", str(config), env=env)
    assert text.returncode == 1, text.stderr
    # the stderr line: the error, then root, paths, remedy and the link
    (line,) = text.stderr.splitlines()
    assert f"(root {root}" in line, line
    for path in paths:
        assert path in line
    if paths:
        assert f"paths ({len(paths)}): " in line
    for piece in case.remedy:
        assert piece in line
    if "`distributor " in line:  # a command to run: with the config that was used
        assert f" --config {config} " in line, line
        assert "--config FILE" not in line
    assert line.endswith(f"; more: distributor explain {case.failure})")
    if case.setup_failure:
        assert text.stdout == ""
    else:
        (refusal_line,) = [row for row in text.stdout.splitlines() if row.startswith("Refusal:")]
        assert f"class={case.failure} " in refusal_line
        assert f"root={json.dumps(root) if ' ' in root else root} " in refusal_line
        if paths:
            assert f"paths={','.join(paths)} count={len(paths)} " in refusal_line
        assert refusal_line.endswith(f' explain="distributor explain {case.failure}" docs={link}')

    document = json.loads(run_script("run", "--config", str(config), "--format", "json", env=env).stdout)
    assert document["ok"] is False
    assert document["error"] == line.removeprefix("distributor: ")
    if case.setup_failure:
        refusals = [document["refusal"]]
        assert document["result"] is None
    else:
        refusals = [action["refusal"] for action in document["result"]["actions"] if action["status"] == "failed"]
    assert refusals and all(r["class"] == case.failure for r in refusals)
    for refusal in refusals:
        assert refusal["root"] == root
        assert refusal["paths"] == paths
        assert refusal["count"] == len(paths)
        assert refusal["docs_url"] == link
        assert refusal["explain"] == f"distributor explain {case.failure}"
        for piece in case.remedy:
            assert piece in refusal["remedy"]
    # and the command it names prints the entry, from the docs installed with distributor
    explained = run_script("explain", case.failure)
    assert explained.returncode == 0 and f"Class `{case.failure}`" in explained.stdout


def test_many_unmanaged_files_name_the_first_few_and_the_count(tmp_path: Path) -> None:
    _spool(tmp_path)
    site = tmp_path / "out" / "site"
    site.mkdir(parents=True)
    for index in range(12):
        (site / f"file-{index:02d}.txt").write_text("x\n")
    config = _config(tmp_path, LOCAL)
    document = json.loads(run_script("run", "--config", str(config), "--format", "json").stdout)
    (refusal,) = [action["refusal"] for action in document["result"]["actions"]]
    assert refusal["paths"] == [f"{site}/file-{index:02d}.txt" for index in range(5)]
    assert refusal["count"] == 12
    assert f"{site}/file-04.txt and 7 more; remedy:" in document["error"]


def test_the_link_follows_where_the_docs_are_served(tmp_path: Path) -> None:
    config, env = _unmanaged(tmp_path)
    served = "https://docs.example.org/distributor/troubleshooting.html"
    result = run_script("run", "--config", str(config), env={**env, "DISTRIBUTOR_TROUBLESHOOTING_URL": served})
    assert result.stderr.rstrip("\n").endswith(
        f"; more: distributor explain unmanaged_content; see {served}#unmanaged-content)")
    document = json.loads(run_script("run", "--config", str(config), "--format", "json",
                                     env={**env, "DISTRIBUTOR_TROUBLESHOOTING_URL": served}).stdout)
    assert document["result"]["actions"][0]["refusal"]["docs_url"] == f"{served}#unmanaged-content"


MAINTENANCE = [
    # (command and flags, how the destination is prepared, failure class, path under the root, remedy piece)
    (("reconcile-state", "--dry-run"), "empty", "missing_state", ".distributor.json", "--all-bundles"),
    (("prune", "--dry-run"), "other", "foreign_owner", ".distributor.json", "other/site"),
    (("audit",), "invalid", "invalid_state", ".distributor.json", "distributor inspect"),
    (("reconcile-state", "--adopt"), "other", "foreign_owner", ".distributor.json", "other/site"),
]


@pytest.mark.parametrize(("command", "prepare", "failure", "path", "remedy"), MAINTENANCE,
                         ids=[f"{m[0][0]}{m[0][1] if len(m[0]) > 1 else ''}-{m[2]}" for m in MAINTENANCE])
def test_maintenance_refusals_name_root_path_remedy_and_docs(
    tmp_path: Path, command: tuple[str, ...], prepare: str, failure: str, path: str, remedy: str
) -> None:
    _spool(tmp_path)
    site = tmp_path / "out" / "site"
    site.mkdir(parents=True)
    if prepare == "other":
        other = _config(tmp_path, LOCAL, pipeline="other", name="o.yml")
        assert run_script("run", "--config", str(other)).returncode == 0
    elif prepare == "invalid":
        (site / ".distributor.json").write_text("{not json")
    prune = "retention: {prune: {enabled: true, keep_latest: 0}}"
    config = _config(tmp_path, LOCAL.replace("path_mapping: {mode: fixed}", f"path_mapping: {{mode: fixed}}, {prune}"))
    args = (command[0], "--config", str(config), "--pipeline", "reports", "--destination", "site", *command[1:])
    link = installed_link(failure)

    text = run_script(*args)
    assert (text.returncode, text.stdout) == (1, ""), text.stderr
    assert f" (root {site}; paths (1): {site}/{path}; remedy: " in text.stderr
    assert remedy in text.stderr
    if "`distributor " in text.stderr:
        assert f" --config {config} " in text.stderr
    assert text.stderr.endswith(f"; more: distributor explain {failure})\n")

    document = json.loads(run_script(*args, "--format", "json").stdout)
    assert (document["ok"], document["result"]) == (False, None)
    assert document["error"] == text.stderr.removeprefix("distributor: ").rstrip("\n")
    refusal = document["refusal"]
    assert (refusal["class"], refusal["root"], refusal["paths"]) == (failure, str(site), [f"{site}/{path}"])
    assert remedy in refusal["remedy"] and refusal["docs_url"] == link


@pytest.mark.parametrize("failure", FAILURE_CLASSES)
def test_every_failure_class_has_its_troubleshooting_entry(failure: str) -> None:
    """Every link a refusal prints opens an entry that names its class (docs match the messages)."""
    anchor = f'<a id="{failure.replace("_", "-")}"></a>'
    assert TROUBLESHOOTING.count(anchor) == 1
    entry = TROUBLESHOOTING.split(anchor, 1)[1].split("<a id=", 1)[0]
    assert f"`{failure}`" in entry
    assert f"`{failure}`" in TROUBLESHOOTING.split("## What a refusal tells you", 1)[1].split("\n## ", 1)[0]
