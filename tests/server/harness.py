"""Test harness for the upload server: configs, bundles, archives, and a real uvicorn server on
127.0.0.1 (in-process thread or ``distributor serve`` subprocess)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import uvicorn
import yaml

from distributor_core.bundle import Manifest, build_manifest, manifest_to_obj, write_manifest
from distributor_core.config import Config, Environment, load_config
from distributor_core.server import create_app
from distributor_core.server.serve import uvicorn_config
from tests.bundle.conftest import REPORT, SUMMARY, make_bundle

TOKEN = "reports-secret"
DEFAULT_FILES = {"report.md": REPORT, "summary.txt": SUMMARY}


# --- configs ----------------------------------------------------------------------------------


@dataclass
class Setup:
    """A config file in ``root`` and what the tests need to talk about it."""

    root: Path
    config_path: Path
    tokens: dict[str, str]
    destinations: dict[str, Path]

    @property
    def config(self) -> Config:
        return load_config(self.config_path)

    @property
    def env(self) -> Environment:
        return Environment(self.environ)

    @property
    def environ(self) -> dict[str, str]:
        return {f"TOKEN_{token_id.upper().replace('-', '_')}": value for token_id, value in self.tokens.items()}

    def staging(self, pipeline_id: str) -> Path:
        return self.root / ".distributor" / "staging" / pipeline_id

    @property
    def staging_root(self) -> Path:
        return self.root / ".distributor" / "staging"


def write_setup(
    root: Path,
    *,
    pipelines: dict[str, int] | None = None,
    tokens: dict[str, tuple[str, list[str]]] | None = None,
    http: dict[str, Any] | None = None,
    max_upload_size: dict[str, str] | None = None,
    extra_pipelines: list[dict[str, Any]] | None = None,
) -> Setup:
    """``pipelines`` maps an upload pipeline id to its number of local destinations;
    ``tokens`` maps a token id to ``(value, allowed pipelines)``."""
    pipelines = pipelines if pipelines is not None else {"reports": 1}
    tokens = tokens if tokens is not None else {"reporter": (TOKEN, list(pipelines))}
    root.mkdir(parents=True, exist_ok=True)
    destinations: dict[str, Path] = {}
    doc: dict[str, Any] = {
        "server": {"http": {"bind": "127.0.0.1:0", "queue_size": 16, "max_concurrency": 1, "retention": "24h",
                            **(http or {})}},
        "upload_tokens": [
            {"id": token_id, "token_env": f"TOKEN_{token_id.upper().replace('-', '_')}", "allow_pipelines": allowed}
            for token_id, (_, allowed) in tokens.items()
        ],
        "pipelines": [],
    }
    for pipeline_id, count in pipelines.items():
        source: dict[str, Any] = {"backend": "http_upload"}
        if max_upload_size and pipeline_id in max_upload_size:
            source["max_upload_size"] = max_upload_size[pipeline_id]
        dests = []
        for index in range(count):
            dest_id = f"dest{index + 1}"
            path = root / "out" / pipeline_id / dest_id
            destinations[f"{pipeline_id}/{dest_id}"] = path
            dests.append({"id": dest_id, "backend": "local", "path": str(path.relative_to(root))})
        doc["pipelines"].append({"id": pipeline_id, "source": source, "destinations": dests})
    doc["pipelines"].extend(extra_pipelines or [])
    config_path = root / "distributor.yml"
    config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return Setup(root, config_path, {k: v for k, (v, _) in tokens.items()}, destinations)


# --- bundles and archives ---------------------------------------------------------------------


def bundle_dir(
    root: Path, files: dict[str, bytes] | None = None, *, bundle_id: str = "reports.daily",
    created: datetime | None = None,
) -> Manifest:
    files = files if files is not None else dict(DEFAULT_FILES)
    if created is None:
        return make_bundle(root, files, bundle_id=bundle_id)
    root.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    manifest = build_manifest(root, id=bundle_id, files=list(files), created=created)
    write_manifest(root, manifest)
    return manifest


def tar_of_dir(root: Path, *, gz: bool = True, names: list[str] | None = None) -> bytes:
    """A tar (gzip by default) of ``manifest.json`` and the named files of a bundle directory."""
    manifest = json.loads((root / "manifest.json").read_bytes())
    names = names if names is not None else ["manifest.json", *[f["path"] for f in manifest["files"]]]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            tar.add(root / name, arcname=name, recursive=False)
    return buf.getvalue()


def bundle_archive(
    tmp: Path, files: dict[str, bytes] | None = None, *, bundle_id: str = "reports.daily", gz: bool = True,
    created: datetime | None = None,
) -> bytes:
    root = tmp / f"bundle-{bundle_id}-{os.urandom(4).hex()}"
    bundle_dir(root, files, bundle_id=bundle_id, created=created)
    return tar_of_dir(root, gz=gz)


def manifest_bytes(files: dict[str, bytes], *, bundle_id: str = "reports.daily") -> bytes:
    """The canonical manifest.json for ``files`` (in order)."""
    from distributor_core.bundle import ManifestFile, bundle_digest, file_digest, marshal_manifest
    from tests.bundle.conftest import CREATED

    records = [ManifestFile(path, file_digest(data), len(data)) for path, data in files.items()]
    return marshal_manifest(Manifest(1, bundle_id, bundle_digest(records), CREATED, records))


@dataclass
class Entry:
    """One raw tar member for crafted archives."""

    name: str
    data: bytes = b""
    type: bytes = tarfile.REGTYPE
    linkname: str = ""
    size: int | None = None
    pax: dict[str, str] = field(default_factory=dict)
    mode: int = 0o644


def craft_tar(
    entries: list[Entry], *, gz: bool = False, fmt: int = tarfile.PAX_FORMAT, encoding: str = "utf-8"
) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt, encoding=encoding) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.type = entry.type
            info.mode = entry.mode
            info.linkname = entry.linkname
            info.size = len(entry.data) if entry.type in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE) else 0
            if entry.pax:
                info.pax_headers = dict(entry.pax)
            tar.addfile(info, io.BytesIO(entry.data) if info.size else None)
    data = buf.getvalue()
    return gzip.compress(data, mtime=0) if gz else data


def valid_entries(files: dict[str, bytes] | None = None, *, bundle_id: str = "reports.daily") -> list[Entry]:
    files = files if files is not None else dict(DEFAULT_FILES)
    manifest = Entry("manifest.json", manifest_bytes(files, bundle_id=bundle_id))
    return [manifest, *(Entry(k, v) for k, v in files.items())]


# --- staging snapshots ------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry below ``root``: relative path -> (kind, sha256 of content or link target)."""
    result: dict[str, tuple[str, str]] = {}
    if not root.exists():
        return result
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                result[rel] = ("symlink", os.readlink(path))
            elif path.is_dir():
                result[rel] = ("dir", "")
            else:
                result[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return result


# --- servers ----------------------------------------------------------------------------------


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@dataclass
class Running:
    url: str
    app: Any
    server: uvicorn.Server

    @property
    def service(self) -> Any:
        return self.app.state.uploads

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30.0, **kwargs)


@contextmanager
def run_server(app: Any) -> Iterator[Running]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a thread, with the options ``serve`` uses
    (connection guards included); stop it (lifespan shutdown) on exit."""
    sock = free_socket()
    port = sock.getsockname()[1]
    uploads = getattr(app.state, "uploads", None)
    server = uvicorn.Server(uvicorn_config(app, uploads.config if uploads is not None else None))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield Running(f"http://127.0.0.1:{port}", app, server)
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()


@contextmanager
def serve_setup(setup: Setup, **options: Any) -> Iterator[Running]:
    app = create_app(setup.config, env=setup.env, **options)
    with run_server(app) as running:
        yield running


def upload(
    client: httpx.Client,
    pipeline_id: str,
    body: bytes,
    *,
    token: str | None = TOKEN,
    content_type: str = "application/gzip",
    key: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    sent: dict[str, str] = {"Content-Type": content_type}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if key is not None:
        sent["Idempotency-Key"] = key
    sent.update(headers or {})
    return client.post(f"/v1/pipelines/{pipeline_id}/upload", content=body, headers=sent)


def wait_status(
    client: httpx.Client, run_id: str, wanted: str | set[str], *, token: str = TOKEN, timeout: float = 30.0
) -> dict[str, Any]:
    wanted_set = {wanted} if isinstance(wanted, str) else wanted
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = client.get(f"/runs/{run_id}", headers={"Authorization": f"Bearer {token}"})
        if response.status_code == 200:
            last = response.json()
            if last["status"] in wanted_set:
                return last
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} did not reach {wanted_set}; last {last}")


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, message: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {message}")


def published(destination: Path) -> dict[str, bytes]:
    """Published files of a local destination (state file excluded)."""
    if not destination.exists():
        return {}
    return {
        str(p.relative_to(destination)): p.read_bytes()
        for p in sorted(destination.rglob("*"))
        if p.is_file() and p.name != ".distributor.json"
    }


def foreign_lock(destination: Path) -> Path:
    """Hold a destination's lock as another host would, so its publication waits (resolutions A3)."""
    destination.mkdir(parents=True, exist_ok=True)
    lock = destination / ".distributor.lock"
    lock.write_text(json.dumps({
        "holder": "test holder", "host": "elsewhere.invalid", "pid": 1,
        "acquired_at": "2026-01-01T00:00:00Z", "expires_at": "2099-01-01T00:00:00Z", "token": "t",
    }))
    return lock


# --- subprocess serve -------------------------------------------------------------------------


@dataclass
class ServeProcess:
    process: subprocess.Popen[str]
    url: str
    first_line: str

    def stop(self, sig: int = 15, timeout: float = 60) -> tuple[int, str]:
        self.process.send_signal(sig)
        try:
            rest = self.process.stderr.read() if self.process.stderr else ""
            return self.process.wait(timeout), rest
        finally:
            if self.process.poll() is None:
                self.process.kill()


def start_serve(setup: Setup, *args: str, env: dict[str, str] | None = None) -> ServeProcess:
    """``distributor serve --config <setup>`` as a subprocess; waits for the startup line."""
    command = [str(Path(sys.executable).parent / "distributor"), "serve", "--config", str(setup.config_path), *args]
    environ = {**os.environ, **setup.environ, **(env or {})}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environ,
                               cwd=setup.root)
    assert process.stderr is not None
    line = process.stderr.readline()
    if "serving HTTP upload API on " not in line:
        process.kill()
        rest = process.stderr.read()
        raise AssertionError(f"serve did not start: {line}{rest}")
    address = line.strip().rsplit(" ", 1)[-1]
    return ServeProcess(process, f"http://{address}", line)


def manifest_identity_obj(manifest: Manifest) -> dict[str, Any]:
    return manifest_to_obj(manifest)


def wait_idle(service: Any, timeout: float = 30.0) -> None:
    """Wait until every upload record of ``service`` has finished."""
    wait_until(lambda: all(r.finished for r in service.records()) and service.pending_count() == 0, timeout,
               "all uploads to finish")
