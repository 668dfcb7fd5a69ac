"""A scripted HTTP server on 127.0.0.1 (uvicorn) for client tests: it records every request and
answers from a script of (status, JSON body) pairs."""

from __future__ import annotations

import gzip
import io
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.server.harness import run_server


@dataclass
class Recorded:
    method: str
    path: str
    raw_path: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k == name.lower()]
        return values[0] if values else None

    def entries(self) -> list[tuple[str, int, bytes]]:
        """The uploaded archive's members: (name, mode, content), in order."""
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(self.body)), mode="r:") as tar:
            out = []
            for member in tar.getmembers():
                stream = tar.extractfile(member)
                out.append((member.name, member.mode, stream.read() if stream else b""))
            return out


@dataclass
class Script:
    url: str
    requests: list[Recorded] = field(default_factory=list)
    answers: list[tuple[int, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, *answers: tuple[int, Any]) -> None:
        self.answers.extend(answers)

    def next_answer(self, run_id: str = "reports.20260603T120000Z.abcdef12") -> tuple[int, Any]:
        with self.lock:
            if self.answers:
                return self.answers.pop(0)
        return 202, {"run_id": run_id, "pipeline_id": "reports", "status": "accepted",
                     "status_url": f"/runs/{run_id}"}


@pytest.fixture
def script() -> Iterator[Script]:
    holder: dict[str, Script] = {}

    async def handle(request: Request) -> Response:
        body = await request.body()
        current = holder["script"]
        with current.lock:
            current.requests.append(Recorded(
                request.method, request.url.path, request.scope.get("raw_path", b"").decode("latin-1"),
                [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.scope["headers"]], body))
        status, payload = current.next_answer()
        if isinstance(payload, bytes):
            return Response(payload, status_code=status, media_type="text/plain")
        return JSONResponse(payload, status_code=status)

    app = Starlette(routes=[Route("/{path:path}", handle, methods=["GET", "POST"])])
    with run_server(app) as running:
        holder["script"] = Script(running.url)
        yield holder["script"]


def write_producer_bundle(root: Path, *, extra_unlisted: bool = True) -> None:
    from tests.bundle.conftest import make_bundle

    make_bundle(root, bundle_id="reports.daily")
    if extra_unlisted:
        (root / "notes.txt").write_text("not listed\n")
