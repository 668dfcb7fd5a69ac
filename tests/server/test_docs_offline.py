"""``/docs`` works on a host without internet access: headless Chromium (Debian's ``chromium``)
renders the Swagger UI of a real ``distributor serve`` while every name but 127.0.0.1 fails to
resolve, so a page that needed a CDN (FastAPI's default) would stay blank."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx

from tests.server.harness import start_serve, write_setup

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def render(url: str, profile: Path) -> str:
    """The DOM of ``url`` after its scripts ran, with no name resolving but 127.0.0.1."""
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         "--disable-background-networking", "--disable-component-update", "--no-proxy-server",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", f"--user-data-dir={profile}",
         "--virtual-time-budget=20000", "--dump-dom", url],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_docs_render_offline_from_the_servers_own_assets(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    server = start_serve(setup)
    try:
        page = httpx.get(f"{server.url}/docs").text
        # every script, stylesheet and icon of the page comes from the server itself
        referenced = re.findall(r'(?:src|href)="([^"]+)"', page)
        assert referenced and all(ref.startswith("/docs/assets/") for ref in referenced), referenced
        for ref in referenced:
            asset = httpx.get(f"{server.url}{ref}")
            assert asset.status_code == 200 and asset.content, ref
        assert httpx.get(f"{server.url}/docs/assets/index.html").json() == {"error": "not found"}

        dom = render(f"{server.url}/docs", tmp_path / "chromium")
    finally:
        server.stop()
    # Swagger UI ran: the API's title and every route are on the rendered page
    assert "distributor upload API" in dom
    for path in ("/healthz", "/v1/pipelines/{pipeline_id}/upload", "/runs/{run_id}"):
        assert path in dom, path
    assert "opblock" in dom
