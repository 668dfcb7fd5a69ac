"""``GET /docs``: Swagger UI served by the upload server itself, from the assets packaged with the
``swagger-ui-bundle-v2`` distribution, so the page works on a host without internet access (no
CDN, no external favicon).

The page loads ``/docs/assets/<file>`` for the three files it needs (script, stylesheet, icon);
any other name under it answers the server's ``404 {"error":"not found"}``. Like ``/docs`` and
``/openapi.json`` the assets need no token. Behind a reverse proxy that mounts the server under a
prefix (``root_path``), the page's URLs carry it.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"
#: The files of Swagger UI's distribution the page uses, by the name it is served as.
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
}


def install_docs(app: FastAPI, *, title: str) -> None:
    """Add ``GET /docs`` and its assets to ``app`` (created with ``docs_url=None``)."""
    from swagger_ui_bundle import swagger_ui_path

    @app.get(DOCS_PATH, include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        prefix = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{prefix}{app.openapi_url}",
            title=title,
            swagger_js_url=f"{prefix}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{prefix}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{prefix}{ASSETS_PATH}/favicon-32x32.png",
        )

    @app.get(ASSETS_PATH + "/{name}", include_in_schema=False)
    def asset(name: str) -> FileResponse:
        media_type = ASSETS.get(name)
        if media_type is None:
            raise StarletteHTTPException(status_code=404)
        return FileResponse(swagger_ui_path / name, media_type=media_type,
                            headers={"Cache-Control": "public, max-age=86400"})
